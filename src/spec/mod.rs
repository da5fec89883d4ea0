//! The one internal description of a sandbox. The CLI, profiles and JSON requests all build a
//! [`SandboxSpec`], and so does an OCI bundle's config.json (`spec::oci`, with a
//! [`ContainerSetup`]); the launchers build a sandbox from this type alone (cordon-oci keeps
//! the config.json beside it only for its hooks, annotations and state).
//!
//! Everything here is pure data and pure parsing, fully unit-tested; the one read from the
//! filesystem is of a bundle's config.json (`spec::oci::Container::load`).

pub mod container;
pub mod oci;
mod parse;

use std::path::PathBuf;
use std::time::Duration;

pub use container::ContainerSetup;
pub(crate) use parse::check_env_key;
pub use parse::{
    MAX_DURATION, MIN_MEMORY, ParseError, parse_duration, parse_env_pair, parse_memory, parse_size,
};

/// The uid and gid the payload runs as inside the user namespace, whoever the caller is.
pub const SANDBOX_UID: u32 = 1000;
/// See [`SANDBOX_UID`].
pub const SANDBOX_GID: u32 = 1000;
/// The name `/etc/passwd` gives [`SANDBOX_UID`] inside the sandbox.
pub const SANDBOX_USER: &str = "sandbox";
/// The working directory and `$HOME` of the payload: a size-capped tmpfs.
pub const WORKSPACE: &str = "/workspace";
/// Default hostname inside the UTS namespace.
pub const DEFAULT_HOSTNAME: &str = "cordon";
/// Default cap on the files, directories and symlinks of /workspace.
pub const DEFAULT_WORKSPACE_INODES: u64 = 16 * 1024;
/// `PATH` inside the sandbox unless the caller sets one.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

const MIB: u64 = 1024 * 1024;

/// An id mapping line of uid_map / gid_map: `size` ids from `container` inside map to `host`
/// on. The sandbox maps one (its uid or gid to the caller's, or to a root caller's per-run
/// id); an OCI container maps what `linux.uidMappings`/`gidMappings` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdMap {
    pub container: u32,
    pub host: u32,
    pub size: u32,
}

/// Resource limits. `None` means "no limit of that kind".
///
/// Defaults are the ones README.md documents: 30 s wall, 512 MiB memory, 1 CPU,
/// 64 processes, 10 MiB of output per stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Wall-clock limit; the supervisor kills the whole sandbox when it passes.
    pub wall: Duration,
    /// CPU time (user + system) of the whole sandbox.
    pub cpu_time: Option<Duration>,
    /// Memory (RSS + page cache + tmpfs pages charged to the sandbox), no swap.
    pub memory: Option<u64>,
    /// CPU bandwidth in CPUs (1.5 = one and a half cores' worth of time per period).
    pub cpus: Option<f64>,
    /// Processes and threads alive at once.
    pub pids: Option<u64>,
    /// Bytes kept of stdout and of stderr, each. Exceeding it kills the sandbox.
    pub output: u64,
    /// Largest file the payload may write (RLIMIT_FSIZE).
    pub file_size: Option<u64>,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    pub open_files: u64,
    /// Size cap of the /workspace tmpfs.
    pub workspace_size: u64,
    /// Inode cap of the /workspace tmpfs.
    pub workspace_inodes: u64,
    /// Size cap of the /tmp tmpfs (and of /dev/shm).
    pub tmp_size: u64,
    /// Inode cap of the /tmp tmpfs (and of /dev/shm).
    pub tmp_inodes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(30),
            cpu_time: None,
            memory: Some(512 * MIB),
            cpus: Some(1.0),
            pids: Some(64),
            output: 10 * MIB,
            file_size: Some(256 * MIB),
            open_files: 1024,
            workspace_size: 256 * MIB,
            workspace_inodes: DEFAULT_WORKSPACE_INODES,
            tmp_size: 64 * MIB,
            tmp_inodes: 4 * 1024,
        }
    }
}

/// Where the sandbox's root filesystem comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rootfs {
    /// Read-only binds of the host's `/usr` (and the `/bin`, `/lib*`, `/sbin` links or
    /// directories), plus a generated minimal `/etc`.
    Host,
    /// An extracted root filesystem directory, bound read-only as `/` (a container's is
    /// read-only when its [`ContainerSetup::readonly_root`] says so).
    Dir(PathBuf),
}

/// Which limits backend to use. `Auto` probes v2, then v1, then falls back to rlimits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    #[default]
    Auto,
    CgroupV2,
    CgroupV1,
    Rlimit,
}

/// Isolation layers the caller explicitly accepts to lose when the host lacks them.
/// Anything not listed here that cannot be applied is a hard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Degrade {
    /// Run even when Landlock is unavailable or not enforced (reported in the result).
    pub landlock: bool,
    /// Bind host directories read-only when the kernel cannot mount an overlay in a user
    /// namespace (before Linux 5.11): file locks on them are then shared with other sandboxes
    /// and the host (reported in the result).
    pub overlay: bool,
    /// Under `--net host` with the rlimit backend's memory watch, run without counting the
    /// sandbox's socket buffers (they are among the host's sockets; reported in the result).
    pub socket_memory: bool,
    /// Run where a crash would start the host's piped core_pattern helper (RLIMIT_CORE could
    /// not be 1; reported in the result).
    pub core_dumps: bool,
}

/// Where the payload's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StdinSource {
    /// Forward cordon's own stdin through a pipe (never the caller's fd itself).
    #[default]
    Forward,
    /// The payload reads end-of-file at once.
    Null,
    /// Feed the contents of this host file through a pipe.
    File(PathBuf),
    /// Feed these bytes through a pipe.
    Bytes(Vec<u8>),
}

/// A file cordon writes into /workspace before the program starts (by the sandbox's init,
/// never through a host path the sandbox could have planted a symlink at).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Relative path under /workspace, checked by [`check_relative_path`].
    pub path: String,
    pub contents: Vec<u8>,
    /// Permission bits (only 0o777 is kept: never setuid, setgid or sticky).
    pub mode: u32,
}

/// Which files to bring back from /workspace once every process of the sandbox is dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collect {
    /// At most this many files...
    pub max_files: usize,
    /// ...and this many bytes in all; the rest is listed as omitted.
    pub max_bytes: u64,
    /// Only these paths (for a compile phase: the artifact); `None` = everything.
    pub only: Option<Vec<String>>,
    /// Bring the files' contents (for `--output-dir`, a compile's artifact), or only list
    /// their names and sizes (the `--json` result alone needs no more); a listing is not held
    /// to `max_bytes`, which bounds what cordon receives.
    pub contents: bool,
}

impl Default for Collect {
    fn default() -> Self {
        Collect {
            max_files: DEFAULT_COLLECT_FILES,
            max_bytes: DEFAULT_COLLECT_BYTES,
            only: None,
            contents: true,
        }
    }
}

/// The files a collection brings back unless told otherwise (`--collect-files`).
pub const DEFAULT_COLLECT_FILES: usize = 1000;
/// The bytes of file contents a collection brings back unless told otherwise
/// (`--collect-size`).
pub const DEFAULT_COLLECT_BYTES: u64 = 64 * MIB;
/// The most files a collection may be asked to bring back: cordon keeps what it collects in
/// memory.
pub const MAX_COLLECT_FILES: usize = 100_000;
/// The most bytes of file contents a collection may be asked to bring back: cordon holds the
/// files it receives in memory before it writes them.
pub const MAX_COLLECT_BYTES: u64 = 1 << 30;
/// What the file-count cap of a collection takes, for its errors.
pub const COLLECT_FILES_RANGE: &str = "give 1 to 100000 files (the default is 1000); cordon keeps what it collects in memory, so this cap cannot be lifted";
/// What the size cap of a collection takes, for its errors.
pub const COLLECT_SIZE_RANGE: &str = "give 1 byte to 1G (the default is 64M); cordon holds the files it receives in memory before writing them, so this cap cannot be lifted or set above 1G";

/// Checks a file-count cap of a collection (`--collect-files`, `config.collectFiles`, a
/// profile's `collect_files`): 1 to [`MAX_COLLECT_FILES`].
pub fn check_collect_files(n: u64) -> Result<usize, ParseError> {
    match usize::try_from(n) {
        Ok(n) if (1..=MAX_COLLECT_FILES).contains(&n) => Ok(n),
        _ => Err(ParseError::new(
            "file-collection cap",
            &n.to_string(),
            COLLECT_FILES_RANGE,
        )),
    }
}

/// Checks a size cap of a collection (`--collect-size`, `config.collectSize`, a profile's
/// `collect_size`), in bytes: 1 to [`MAX_COLLECT_BYTES`].
pub fn check_collect_size(bytes: u64, given: &str) -> Result<u64, ParseError> {
    if (1..=MAX_COLLECT_BYTES).contains(&bytes) {
        Ok(bytes)
    } else {
        Err(ParseError::new(
            "collection size cap",
            given,
            COLLECT_SIZE_RANGE,
        ))
    }
}

/// Parses `--collect-files N`: a whole number, checked by [`check_collect_files`].
pub fn parse_collect_files(s: &str) -> Result<usize, ParseError> {
    let n: u64 = s.parse().map_err(|_| {
        ParseError::new(
            "file-collection cap",
            s,
            &format!("expected a whole number of files; {COLLECT_FILES_RANGE}"),
        )
    })?;
    check_collect_files(n).map_err(|mut e| {
        e.given = s.to_string();
        e
    })
}

/// Parses `--collect-size SIZE`: a size as [`parse_size`] reads it, checked by
/// [`check_collect_size`].
pub fn parse_collect_size(s: &str) -> Result<u64, ParseError> {
    // Not parse_size's hint: 0 (or a fraction of a byte) lifts no cap here.
    let b = parse_size(s).map_err(|_| {
        ParseError::new(
            "collection size cap",
            s,
            &format!("expected a size, such as 100M or 1G; {COLLECT_SIZE_RANGE}"),
        )
    })?;
    check_collect_size(b, s)
}

impl Collect {
    /// Why a file past the file-count cap is left out (`filesOmitted`): the cap, and, for
    /// the program's own outputs (not a compile's artifact), what raises it.
    pub fn over_files_reason(&self) -> String {
        let raise = if self.only.is_none() {
            " (--collect-files / config.collectFiles raise it)"
        } else {
            ""
        };
        format!("over the {}-file cap{raise}", self.max_files)
    }

    /// Why a file past the size cap is left out (`filesOmitted`), as
    /// [`Collect::over_files_reason`] says it.
    pub fn over_size_reason(&self) -> String {
        let raise = if self.only.is_none() {
            " (--collect-size / config.collectSize raise it)"
        } else {
            ""
        };
        let size = exact_size(self.max_bytes);
        let size = match size.strip_suffix(" bytes").or(size.strip_suffix(" byte")) {
            Some(n) => format!("{n}-byte"),
            None => size.clone(),
        };
        format!("over the {size} total-size cap{raise}")
    }
}

/// A size in its largest binary unit that holds it exactly (`64 MiB`, `1536 KiB`,
/// `1000 bytes`).
pub fn exact_size(b: u64) -> String {
    match b {
        0 => "0 bytes".into(),
        _ if b.is_multiple_of(1 << 30) => format!("{} GiB", b >> 30),
        _ if b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        _ if b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        1 => "1 byte".into(),
        _ => format!("{b} bytes"),
    }
}

/// A host directory bound into the sandbox (dependency sets of `cordon run --packages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// Absolute host path of an existing directory.
    pub src: PathBuf,
    /// Absolute path inside the sandbox: one new top-level directory (e.g. `/deps`).
    pub dst: String,
    /// Read-write (and writable under Landlock); otherwise read-only.
    pub writable: bool,
}

/// Top-level names a [`Bind`] may not take: the root's own directories.
const RESERVED_TOP: &[&str] = &[
    "usr",
    "bin",
    "sbin",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "etc",
    "dev",
    "proc",
    "sys",
    "tmp",
    "workspace",
    "run",
    "var",
    "root",
    "home",
];

/// Longest relative path accepted for input and output files, and longest component.
pub const MAX_PATH_LEN: usize = 1024;
pub const MAX_NAME_LEN: usize = 255;

/// Checks a file name given for /workspace: relative, no `.`/`..`/empty components, no NUL,
/// bounded length. Rejects rather than normalises.
pub fn check_relative_path(path: &str) -> Result<(), ParseError> {
    let bad = |hint: &str| {
        Err(ParseError::new(
            "file name",
            &path.escape_debug().to_string(),
            hint,
        ))
    };
    if path.is_empty() {
        return bad("a file name cannot be empty");
    }
    if path.len() > MAX_PATH_LEN {
        return bad("longer than 1024 bytes");
    }
    if path.contains('\0') {
        return bad("contains a NUL byte");
    }
    if path.starts_with('/') {
        return bad("must be relative to /workspace, not absolute");
    }
    for comp in path.split('/') {
        match comp {
            "" => return bad("has an empty component (`//` or a trailing `/`)"),
            "." | ".." => return bad("`.` and `..` are not allowed"),
            c if c.len() > MAX_NAME_LEN => return bad("has a component longer than 255 bytes"),
            _ => {}
        }
    }
    Ok(())
}

/// Input files must not collide: the same name twice, or a name that another needs as a
/// directory (`a` and `a/b`), would fail only inside the sandbox, after its setup.
fn check_distinct_files(files: &[InputFile], what: &str) -> Result<(), ParseError> {
    let names: std::collections::HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    if names.len() != files.len() {
        let mut seen = std::collections::HashSet::new();
        let dup = files
            .iter()
            .find(|f| !seen.insert(f.path.as_str()))
            .map_or("", |f| f.path.as_str());
        return Err(ParseError::new(what, dup, "the same name is given twice"));
    }
    for f in files {
        let mut prefix = f.path.as_str();
        while let Some((parent, _)) = prefix.rsplit_once('/') {
            if names.contains(parent) {
                return Err(ParseError::new(
                    what,
                    &f.path,
                    &format!(
                        "it needs {parent} as a directory, and {parent} is also given as a file"
                    ),
                ));
            }
            prefix = parent;
        }
    }
    Ok(())
}

/// The smallest tmpfs size cordon takes: one page, which tmpfs rounds any size up to.
const PAGE: u64 = 4096;

/// The fewest CPUs `cpus` may give: the kernel's smallest CPU quota (1 ms per 100 ms period).
pub const MIN_CPUS: f64 = 0.01;

/// The most CPUs `cpus` may give (a quota no host reaches; the kernel refuses one too large
/// to compute).
pub const MAX_CPUS: f64 = 1024.0;

/// The most processes `pids` may give: Linux's largest number of process ids (PID_MAX_LIMIT).
pub const MAX_PIDS: u64 = 4 << 20;

/// The most open files a process may have here: `fs.nr_open` (Linux's default, 1048576, when
/// it cannot be read). RLIMIT_NOFILE above it is refused.
fn max_open_files() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// Everything the launcher needs to run one sandbox.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The command and its arguments; `argv[0]` is looked up in `PATH` inside the sandbox
    /// (the environment's, unless `command_path` says otherwise).
    pub argv: Vec<String>,
    /// The `PATH` that `argv[0]` is looked up in, when not the program's environment's:
    /// `cordon run` finds a profile's interpreter or compiler on the profile's `PATH`, so
    /// that the program's own `PATH` (a request's `env`, `--env`) cannot break or replace
    /// it. `None`: the environment's (`cordon exec`: the command is the caller's own).
    pub command_path: Option<String>,
    /// Extra `KEY=VALUE` pairs on top of the allow-listed base environment; with a
    /// [`ContainerSetup`], the whole environment ([`SandboxSpec::environment`]).
    pub env: Vec<(String, String)>,
    pub rootfs: Rootfs,
    /// The UTS namespace's hostname; with a [`ContainerSetup`], empty means "not set".
    pub hostname: String,
    pub limits: Limits,
    pub stdin: StdinSource,
    /// Keep the exact bytes of a stdout or stderr that is not UTF-8 beside its text, for a
    /// result that gives them in base64 (`--output-encoding base64`); otherwise only the
    /// text is kept, and such an output costs one copy, not two.
    pub exact_output: bool,
    pub degrade: Degrade,
    pub backend: BackendChoice,
    /// Name of the seccomp policy (a file under `profiles/seccomp/`, embedded at build time).
    pub seccomp_policy: String,
    /// Also copy the program's stdout/stderr to cordon's own, live, as they arrive (still
    /// capped at the output limit). The CLI does this unless `--json` was given.
    pub passthrough: bool,
    /// Also write the program's stdout/stderr to cordon's own stdout, live, as JSON lines
    /// (`{"stdout": "..."}`, `{"stderr": "..."}`) in this encoding (still capped at the
    /// output limit): `--stream`.
    pub stream: Option<crate::outcome::OutputEncoding>,
    /// The phase of a `cordon run` whose output `stream` carries, when not the program's:
    /// each piece then comes inside an object of that name (`{"compile": {"stderr": "..."}}`,
    /// `{"dependencies": {...}}`), as the result keeps that output under the same key.
    pub stream_phase: Option<&'static str>,
    /// Files written into /workspace before the program starts.
    pub files: Vec<InputFile>,
    /// Bring files back from /workspace after the run (see [`Collect`]).
    pub collect: Option<Collect>,
    /// How the sandbox reaches the network (default: it does not).
    pub network: crate::net::Network,
    /// Host directories bound into the sandbox.
    pub binds: Vec<Bind>,
    /// A tmpfs whose tree init copies out to a host directory when the program exits 0.
    pub export: Option<Export>,
    /// The process and root set up field by field, as an OCI config.json says (identity,
    /// capabilities, namespaces, mounts...), for cordon-oci's launcher. `None` for cordon's
    /// own runs, whose set-up is fixed; the hardened launcher refuses a spec that has one
    /// ([`SandboxSpec::validate`]).
    pub container: Option<Box<ContainerSetup>>,
    /// What the limits are called in messages ("raise it with --timeout"): the flags, a
    /// request's fields, or the compile phase's flags or fields.
    pub limit_naming: LimitNaming,
}

/// Why a wall-clock limit of 0 is refused.
pub const TIMEOUT_ZERO: &str =
    "the wall-clock limit cannot be lifted; give a duration above zero, e.g. 10m";
/// Why an output limit of 0 is refused.
pub const OUTPUT_LIMIT_ZERO: &str = "cordon keeps each stream's output in memory up to this size, so it cannot be lifted, and 0 would kill the program at its first byte; give a size, e.g. 100M";

/// Whose name a limit goes by in messages: the flag, profile key or request field that sets
/// it, so that "raise it with ..." names what the caller can change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LimitNaming {
    /// `cordon exec`'s and `cordon run`'s flags (`--timeout`).
    #[default]
    Flags,
    /// `cordon run`'s compile-phase flags (`--compile-timeout`).
    CompileFlags,
    /// A profile's keys (`timeout`), under the table the caller names.
    Profile,
    /// A JSON request's `config` fields (`config.timeout`).
    Request,
    /// A JSON request's compile phase (`config.compileTimeout`).
    CompileRequest,
    /// A package install's sandbox (`cordon run --packages`): the profile's
    /// `[packages.limits]`.
    Packages,
}

impl LimitNaming {
    /// What raises the limit `key`: its name, and for a request, that the operator's
    /// ceiling still holds.
    pub fn raise(self, key: &str) -> String {
        match self {
            LimitNaming::Request | LimitNaming::CompileRequest => format!(
                "{}, as far as this cordon's operator allows",
                self.name(key)
            ),
            _ => self.name(key),
        }
    }

    /// The name of the limit that a profile's `[limits]` calls `key` (`timeout`, `cpu_time`,
    /// `memory`, `cpus`, `pids`, `output_limit`, `file_size`, `open_files`,
    /// `workspace_size`, `workspace_inodes`, `tmp_size`, `collect_files`, `collect_size`).
    pub fn name(self, key: &str) -> String {
        let flag = |prefix: &str| format!("--{prefix}{}", key.replace('_', "-"));
        let compile_key = || format!("the profile's [compile_limits] {key}");
        match self {
            LimitNaming::Flags => flag(""),
            LimitNaming::Profile => key.to_string(),
            LimitNaming::Packages => format!("{key} in the profile's [packages.limits]"),
            LimitNaming::CompileFlags => match key {
                "timeout" | "memory" | "pids" => flag("compile-"),
                _ => compile_key(),
            },
            LimitNaming::Request => match key {
                "timeout" => "config.timeout".into(),
                "cpu_time" => "config.cpuTime".into(),
                "memory" => "config.memoryLimit".into(),
                "cpus" => "config.cpuLimit".into(),
                "pids" => "config.pids".into(),
                "output_limit" => "config.outputLimit".into(),
                "collect_files" => "config.collectFiles".into(),
                "collect_size" => "config.collectSize".into(),
                _ => format!("cordon run's {}", flag("")),
            },
            LimitNaming::CompileRequest => match key {
                "timeout" => "config.compileTimeout".into(),
                "memory" | "pids" => format!("cordon run's {}", flag("compile-")),
                _ => compile_key(),
            },
        }
    }
}

/// A writable tmpfs at `dir`, sized by the workspace limits (`workspace_size`,
/// `workspace_inodes`), whose tree the sandbox's init copies into the host directory `host`
/// once the program has exited 0 and every other process of the sandbox is gone. What the
/// program writes is bounded by the tmpfs, where a writable bind of a host directory would let
/// it fill the host's disk. `cordon run --packages` installs this way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Inside the sandbox: one new top-level directory (e.g. `/deps`).
    pub dir: String,
    /// Absolute host path of an existing, empty directory that the sandbox's host uid can
    /// write; opened by init before the root is built.
    pub host: PathBuf,
    /// Files written into the tmpfs before the program starts (paths relative to `dir`).
    pub seed: Vec<InputFile>,
}

/// Sets `key` in an environment list as `setenv` does: a key already there keeps its place and
/// takes the new value; a new one goes last. So a list never holds a key twice, and a later
/// setting wins (for an OCI container, as runc builds the environment).
pub fn set_env(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_string(),
        None => env.push((key.to_string(), value.to_string())),
    }
}

/// The caller's `$TERM` when it is a plain terminal name, else `dumb`.
fn sanitized_term(term: Option<&str>) -> &str {
    match term {
        Some(t)
            if !t.is_empty()
                && t.len() <= 64
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c)) =>
        {
            t
        }
        _ => "dumb",
    }
}

impl SandboxSpec {
    /// A spec with every default for running `argv`.
    pub fn new(argv: Vec<String>) -> Self {
        SandboxSpec {
            argv,
            command_path: None,
            env: Vec::new(),
            rootfs: Rootfs::Host,
            hostname: DEFAULT_HOSTNAME.to_string(),
            limits: Limits::default(),
            stdin: StdinSource::default(),
            exact_output: false,
            degrade: Degrade::default(),
            backend: BackendChoice::default(),
            seccomp_policy: "default".to_string(),
            passthrough: false,
            stream: None,
            stream_phase: None,
            files: Vec::new(),
            collect: None,
            network: crate::net::Network::None,
            binds: Vec::new(),
            export: None,
            container: None,
            limit_naming: LimitNaming::Flags,
        }
    }

    /// The payload's complete environment: an allow-list (PATH, HOME, LANG, TERM, USER)
    /// built here, never copied from the caller, then the caller's `--env` pairs on top.
    /// `term` is the caller's `$TERM`, the only value taken from outside. A container's
    /// environment is its `env` alone, as its config gives it.
    pub fn environment(&self, term: Option<&str>) -> Vec<(String, String)> {
        if self.container.is_some() {
            return self.env.clone();
        }
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), DEFAULT_PATH.into()),
            ("HOME".into(), WORKSPACE.into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("USER".into(), SANDBOX_USER.into()),
            ("TERM".into(), sanitized_term(term).into()),
        ];
        if let crate::net::Network::Allow(_) = self.network {
            env.extend(crate::net::proxy_env());
        }
        for (k, v) in &self.env {
            set_env(&mut env, k, v);
        }
        env
    }

    /// The `PATH` that `argv[0]` is looked up in: `command_path`, else the environment's
    /// (`env`: [`SandboxSpec::environment`]'s answer).
    pub fn lookup_path(&self, env: &[(String, String)]) -> Vec<String> {
        let path = match &self.command_path {
            Some(p) => Some(p.as_str()),
            None => env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str()),
        };
        path.unwrap_or_default()
            .split(':')
            .filter(|d| !d.is_empty())
            .map(String::from)
            .collect()
    }

    /// Checks that do not need the host: the launcher calls this first.
    pub fn validate(&self) -> Result<(), ParseError> {
        if self.container.is_some() {
            return Err(ParseError::new(
                "sandbox spec",
                "a container set-up",
                "this spec sets up a container field by field (an OCI config.json), which cordon's hardened launcher does not honour: run the bundle with `cordon-oci run`",
            ));
        }
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(ParseError::new(
                "command",
                "",
                "give the command to run after `--`",
            ));
        }
        if self.passthrough && self.stream.is_some() {
            return Err(ParseError::new(
                "sandbox spec",
                "passthrough and stream",
                "both would write the program's output to cordon's stdout, as it is and as JSON lines; set one of them",
            ));
        }
        for a in &self.argv {
            if a.contains('\0') {
                return Err(ParseError::new(
                    "command",
                    a,
                    "arguments cannot contain NUL bytes",
                ));
            }
        }
        for (k, v) in &self.env {
            parse::check_env_key(k)?;
            if v.contains('\0') {
                return Err(ParseError::new(
                    "--env",
                    k,
                    "values cannot contain NUL bytes",
                ));
            }
        }
        let name = |key: &str| self.limit_naming.name(key);
        if self.limits.wall.is_zero() {
            return Err(ParseError::new(&name("timeout"), "0", TIMEOUT_ZERO));
        }
        if self.limits.cpu_time.is_some_and(|t| t.is_zero()) {
            return Err(ParseError::new(
                &name("cpu_time"),
                "0",
                "a CPU-time limit of 0 would stop the program before it starts; give a duration above zero, or none",
            ));
        }
        if self.limits.output == 0 {
            return Err(ParseError::new(
                &name("output_limit"),
                "0",
                OUTPUT_LIMIT_ZERO,
            ));
        }
        if let Some(c) = self.limits.cpus
            && !(c > 0.0 && c.is_finite())
        {
            return Err(ParseError::new(
                &name("cpus"),
                &c.to_string(),
                "give a positive number of CPUs",
            ));
        }
        // The kernel's CPU quota is at least 1 ms per 100 ms period; a figure below it would
        // be reported but not enforced as given.
        if let Some(c) = self.limits.cpus
            && !(MIN_CPUS..=MAX_CPUS).contains(&c)
        {
            // 1e300 as it was written, not as 301 digits.
            let shown = if c >= 1e9 {
                format!("{c:e}")
            } else {
                c.to_string()
            };
            return Err(ParseError::new(
                &name("cpus"),
                &shown,
                &format!(
                    "give between {MIN_CPUS} (the kernel's smallest CPU quota, 1 ms per 100 ms) and {MAX_CPUS} CPUs"
                ),
            ));
        }
        if self.limits.pids == Some(0) {
            return Err(ParseError::new(
                &name("pids"),
                "0",
                "at least one process is needed",
            ));
        }
        if let Some(p) = self.limits.pids
            && p > MAX_PIDS
        {
            return Err(ParseError::new(
                &name("pids"),
                &p.to_string(),
                &format!("Linux has at most {MAX_PIDS} process ids; give that or fewer"),
            ));
        }
        if self.limits.open_files == 0 {
            return Err(ParseError::new(
                &name("open_files"),
                "0",
                "a program with no file descriptor cannot even load its libraries; give 1 or more (the default is 1024)",
            ));
        }
        let nr_open = max_open_files();
        if self.limits.open_files > nr_open {
            return Err(ParseError::new(
                &name("open_files"),
                &self.limits.open_files.to_string(),
                &format!(
                    "this kernel allows a process at most {nr_open} open files (fs.nr_open); give that or fewer"
                ),
            ));
        }
        // tmpfs reads a size or inode count of 0 as "unbounded": a cap cannot be lifted that
        // way (the memory limit would be all that held a full /workspace).
        for (key, v, hint) in [
            (
                "workspace_size",
                self.limits.workspace_size,
                "a size, e.g. 1G",
            ),
            (
                "workspace_inodes",
                self.limits.workspace_inodes,
                "a number of files, e.g. 100000",
            ),
            ("tmp_size", self.limits.tmp_size, "a size, e.g. 256M"),
            ("tmp inodes", self.limits.tmp_inodes, "a number of files"),
        ] {
            if v == 0 {
                let what = if key == "tmp inodes" {
                    key.to_string()
                } else {
                    name(key)
                };
                return Err(ParseError::new(
                    &what,
                    "0",
                    &format!("a tmpfs of 0 would have no cap at all; give {hint}"),
                ));
            }
        }
        // tmpfs rounds a size up to whole pages: a smaller one would be reported as given
        // but hold a page.
        for (key, v) in [
            ("workspace_size", self.limits.workspace_size),
            ("tmp_size", self.limits.tmp_size),
        ] {
            if v < PAGE {
                return Err(ParseError::new(
                    &name(key),
                    &v.to_string(),
                    "a tmpfs holds whole 4 KiB pages: give at least 4K",
                ));
            }
        }
        for f in &self.files {
            check_relative_path(&f.path)?;
        }
        check_distinct_files(&self.files, "file name")?;
        if let Some(c) = &self.collect {
            // What cordon receives is held in its memory: the caps are bounded.
            check_collect_files(c.max_files as u64)
                .map_err(|e| ParseError::new(&name("collect_files"), &e.given, &e.hint))?;
            check_collect_size(c.max_bytes, &c.max_bytes.to_string())
                .map_err(|e| ParseError::new(&name("collect_size"), &e.given, &e.hint))?;
        }
        if let Some(only) = self.collect.as_ref().and_then(|c| c.only.as_ref()) {
            for p in only {
                check_relative_path(p)?;
            }
        }
        let dirs = self
            .binds
            .iter()
            .map(|b| ("--ro-bind destination", &b.dst, &b.src))
            .chain(self.export.iter().map(|e| ("export", &e.dir, &e.host)));
        let mut seen = Vec::new();
        for (what, dst, src) in dirs {
            let top = dst.strip_prefix('/').unwrap_or("");
            let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            let why = if top.is_empty()
                || top.contains('/')
                || check_relative_path(top).is_err()
                || !top.chars().all(plain)
            {
                Some("give one new top-level directory inside, such as /data (letters, digits, `.`, `_`, `-`)".to_string())
            } else if RESERVED_TOP.contains(&top) {
                Some(format!(
                    "that name is kept for the sandbox's own root (/{}); give a new one, such as /data",
                    RESERVED_TOP.join(", /")
                ))
            } else if seen.contains(&top) {
                Some("that directory is used twice; give each its own name".to_string())
            } else if !src.is_absolute() {
                Some("the host path must be absolute".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                return Err(ParseError::new(what, dst, &why));
            }
            seen.push(top);
        }
        for f in self.export.iter().flat_map(|e| &e.seed) {
            check_relative_path(&f.path)?;
        }
        if let Some(e) = &self.export {
            check_distinct_files(&e.seed, "export file name")?;
        }
        // It goes into the generated /etc/hosts: RFC 1123 characters only, no newline.
        let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        if self.hostname.is_empty()
            || self.hostname.len() > 64
            || !self.hostname.chars().all(ok_char)
        {
            return Err(ParseError::new(
                "hostname",
                &self.hostname.escape_debug().to_string(),
                "1 to 64 letters, digits, `-` and `.`",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_files_may_not_collide() {
        let file = |p: &str| InputFile {
            path: p.into(),
            contents: Vec::new(),
            mode: 0o644,
        };
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.files = vec![file("a/b.txt"), file("a/c.txt"), file("d")];
        s.validate().unwrap();
        s.files = vec![file("x.txt"), file("x.txt")];
        assert!(s.validate().unwrap_err().to_string().contains("twice"));
        s.files = vec![file("a/b/c"), file("a")];
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("needs a as a directory"), "{e}");
    }

    #[test]
    fn an_export_directory_is_one_new_top_level_directory_used_once() {
        let mut s = SandboxSpec::new(vec!["true".into()]);
        let export = |dir: &str| Export {
            dir: dir.into(),
            host: "/tmp/set".into(),
            seed: Vec::new(),
        };
        s.export = Some(export("/deps"));
        assert!(s.validate().is_ok());
        for bad in ["/", "/usr", "/a/b", "deps", "/.."] {
            s.export = Some(export(bad));
            assert!(s.validate().is_err(), "{bad}");
        }
        s.export = Some(export("/deps"));
        s.binds = vec![Bind {
            src: "/tmp/other".into(),
            dst: "/deps".into(),
            writable: false,
        }];
        assert!(
            s.validate().is_err(),
            "a bind and the export on one directory"
        );
        s.binds.clear();
        s.export.as_mut().unwrap().seed = vec![InputFile {
            path: "../escape".into(),
            contents: Vec::new(),
            mode: 0o644,
        }];
        assert!(
            s.validate().is_err(),
            "a seed file outside the export directory"
        );
    }

    #[test]
    fn environment_is_allow_list_plus_overrides() {
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.env = vec![("FOO".into(), "1".into()), ("HOME".into(), "/tmp".into())];
        let env = s.environment(Some("xterm"));
        assert_eq!(env.iter().filter(|(k, _)| k == "HOME").count(), 1);
        assert!(env.contains(&("HOME".into(), "/tmp".into())));
        assert!(env.contains(&("FOO".into(), "1".into())));
        assert!(env.contains(&("TERM".into(), "xterm".into())));
        assert_eq!(env.len(), 6);
    }

    /// `argv[0]` is found on the environment's PATH, unless the spec names the PATH to find
    /// it on: then the program still sees its own PATH, and the lookup does not use it.
    #[test]
    fn the_command_is_found_on_command_path_else_the_environments() {
        let mut s = SandboxSpec::new(vec!["python3".into()]);
        s.env = vec![("PATH".into(), "/nope:/workspace/bin".into())];
        let env = s.environment(None);
        assert_eq!(s.lookup_path(&env), ["/nope", "/workspace/bin"]);
        s.command_path = Some("/usr/local/bin:/usr/bin".into());
        let env = s.environment(None);
        assert_eq!(s.lookup_path(&env), ["/usr/local/bin", "/usr/bin"]);
        assert!(env.contains(&("PATH".into(), "/nope:/workspace/bin".into())));
        // No PATH at all: nothing to search (a name without a slash is then not found).
        assert!(SandboxSpec::new(vec![]).lookup_path(&[]).is_empty());
    }

    #[test]
    fn relative_paths() {
        for ok in ["a", "a/b.txt", "dir/sub/x.py", "ü.txt", "-rf", "$(x)"] {
            assert!(check_relative_path(ok).is_ok(), "{ok}");
        }
        let long_name = "x".repeat(256);
        let long_path = "a/".repeat(600);
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "./a",
            "a//b",
            "a/",
            "a\0b",
            long_name.as_str(),
            long_path.as_str(),
        ] {
            assert!(check_relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn validate_rejects_empty_and_nul() {
        assert!(SandboxSpec::new(vec![]).validate().is_err());
        assert!(SandboxSpec::new(vec!["a\0b".into()]).validate().is_err());
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.limits.cpus = Some(0.0);
        assert!(s.validate().is_err());
        s.limits.cpus = Some(0.5);
        assert!(s.validate().is_ok());
        s.env = vec![("A=B".into(), "x".into())];
        assert!(s.validate().is_err());
        // Output passed through and streamed as JSON would mix on one stdout.
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.passthrough = true;
        s.stream = Some(crate::outcome::OutputEncoding::Utf8);
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("set one of them")
        );
        s.passthrough = false;
        assert!(s.validate().is_ok());
    }

    /// The collection's caps take 1 to 100000 files and 1 byte to 1 GiB; anything else, or
    /// a value that is not a number, is refused with the value and the range.
    #[test]
    fn collection_caps_are_bounded() {
        assert_eq!(parse_collect_files("1"), Ok(1));
        assert_eq!(parse_collect_files("1500"), Ok(1500));
        assert_eq!(parse_collect_files("100000"), Ok(MAX_COLLECT_FILES));
        assert_eq!(parse_collect_size("1"), Ok(1));
        assert_eq!(parse_collect_size("100M"), Ok(100 << 20));
        assert_eq!(parse_collect_size("1G"), Ok(MAX_COLLECT_BYTES));
        assert_eq!(parse_collect_size("64M"), Ok(DEFAULT_COLLECT_BYTES));
        for bad in ["0", "100001", "x", "-1", "1k", ""] {
            let e = parse_collect_files(bad).unwrap_err();
            assert_eq!(e.given, bad);
            assert!(e.hint.contains("1 to 100000 files"), "{bad}: {e}");
        }
        for bad in ["0", "0.4", "1025M", "1.5G", "2G", "x", "-1", ""] {
            let e = parse_collect_size(bad).unwrap_err();
            assert_eq!(e.given, bad);
            assert!(
                e.hint.contains("1 byte to 1G") && e.hint.contains("in memory"),
                "{bad}: {e}"
            );
            assert!(!e.hint.contains("lift the limit"), "{bad}: {e}");
        }
        assert!(check_collect_files(u64::MAX).is_err());
        assert!(check_collect_size(MAX_COLLECT_BYTES + 1, "x").is_err());
    }

    /// The reason a file is left out names the cap and, for the program's own outputs, the
    /// flag and the request field that raise it; a compile's artifact names no such thing.
    #[test]
    fn an_omission_over_a_cap_says_the_cap_and_what_raises_it() {
        let c = Collect {
            max_files: 1000,
            ..Collect::default()
        };
        assert_eq!(
            c.over_files_reason(),
            "over the 1000-file cap (--collect-files / config.collectFiles raise it)"
        );
        assert_eq!(
            c.over_size_reason(),
            "over the 64 MiB total-size cap (--collect-size / config.collectSize raise it)"
        );
        let small = Collect {
            max_bytes: 1000,
            ..Collect::default()
        };
        assert!(
            small
                .over_size_reason()
                .starts_with("over the 1000-byte total-size cap (")
        );
        let artifact = Collect {
            only: Some(vec!["main".into()]),
            ..Collect::default()
        };
        assert_eq!(artifact.over_files_reason(), "over the 1000-file cap");
        assert_eq!(
            artifact.over_size_reason(),
            "over the 64 MiB total-size cap"
        );
        assert_eq!(exact_size(1), "1 byte");
        assert_eq!(exact_size(1536 << 10), "1536 KiB");
        assert_eq!(exact_size(1 << 30), "1 GiB");
        assert_eq!(exact_size(100_000_001), "100000001 bytes");
    }

    /// A spec built in code is held to the collection's bounds too, naming the cap as the
    /// spec's caller knows it.
    #[test]
    fn a_spec_with_collection_caps_out_of_bounds_is_refused() {
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.collect = Some(Collect {
            max_files: MAX_COLLECT_FILES,
            max_bytes: MAX_COLLECT_BYTES,
            ..Collect::default()
        });
        s.validate().unwrap();
        s.collect.as_mut().unwrap().max_files = 0;
        let e = s.validate().unwrap_err().to_string();
        assert!(
            e.contains("--collect-files `0`") && e.contains("1 to 100000"),
            "{e}"
        );
        s.collect.as_mut().unwrap().max_files = 10;
        s.collect.as_mut().unwrap().max_bytes = MAX_COLLECT_BYTES + 1;
        s.limit_naming = LimitNaming::Request;
        let e = s.validate().unwrap_err().to_string();
        assert!(
            e.contains("config.collectSize `1073741825`") && e.contains("1 byte to 1G"),
            "{e}"
        );
    }

    #[test]
    fn no_open_files_is_refused_naming_the_flag() {
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.limits.open_files = 0;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("--open-files") && e.contains("1 or more"), "{e}");
        s.limits.open_files = 1;
        assert!(s.validate().is_ok());
    }

    /// Limits the kernel would refuse, or enforce otherwise than given, are refused up front
    /// as the caller's mistake, naming the bound (not met as a cgroup write that fails).
    #[test]
    fn limits_beyond_what_the_kernel_takes_are_refused() {
        let check = |f: &dyn Fn(&mut Limits), says: &str| {
            let mut s = SandboxSpec::new(vec!["true".into()]);
            f(&mut s.limits);
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        };
        check(&|l| l.cpus = Some(0.001), "give between 0.01");
        check(
            &|l| l.cpus = Some(1e300),
            "--cpus `1e300`: give between 0.01",
        );
        check(
            &|l| l.pids = Some(MAX_PIDS + 1),
            "at most 4194304 process ids",
        );
        check(&|l| l.open_files = max_open_files() + 1, "(fs.nr_open)");
        check(
            &|l| l.workspace_size = 1,
            "--workspace-size `1`: a tmpfs holds whole 4 KiB pages",
        );
        check(
            &|l| l.tmp_size = 4095,
            "--tmp-size `4095`: a tmpfs holds whole 4 KiB pages",
        );
        let mut s = SandboxSpec::new(vec!["true".into()]);
        s.limits.cpus = Some(MIN_CPUS);
        s.limits.pids = Some(MAX_PIDS);
        s.limits.open_files = max_open_files();
        s.validate().unwrap();
        s.limits.cpus = Some(MAX_CPUS);
        s.validate().unwrap();
    }
}

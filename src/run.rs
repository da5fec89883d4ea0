//! `cordon run`: code in a language in, what it printed and wrote out.
//!
//! One [`RunRequest`] (from the CLI, a JSON request, or the library) becomes one or two
//! sandboxes: for a compiled language a compile sandbox (the compiler reads untrusted source,
//! so it is sandboxed too: `include_str!("/etc/shadow")` sees the sandbox's root, not the
//! host's), whose artifact is cached by content, then a run sandbox; for an interpreted
//! language just the run sandbox. Both go through the one launcher ([`crate::launch::run`]).

use crate::cache::{Artifact, Cache, Key};
use crate::history::{History, Record};
use crate::outcome::{CompileReport, ErrorKind, MetricSource, Outcome, Status};
use crate::profile::{LimitOverrides, Profile, ProfileError};
use crate::spec::{
    BackendChoice, Collect, Degrade, InputFile, LimitNaming, Limits, ParseError, Rootfs,
    SandboxSpec, StdinSource,
};
use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Bytes of compile artifacts the cache keeps (least recently used evicted first).
pub const CACHE_MAX_BYTES: u64 = 512 << 20;
/// The largest input (code plus files) a request may carry.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The most bytes a JSON request's text may have: the input cap in base64, and 1 MiB for the
/// rest of the request. Checked before it is parsed, so a request cannot make cordon hold
/// more than a few times this.
pub const MAX_REQUEST_BYTES: u64 = MAX_INPUT_BYTES / 3 * 4 + (1 << 20);

/// The most JSON values (strings, numbers, arrays, objects...) a request may hold: each costs
/// cordon a small allocation once parsed, so millions of empty ones (`"args": ["", "", ...]`)
/// would cost gigabytes from a small request.
pub const MAX_REQUEST_VALUES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Invalid(#[from] ParseError),
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    #[error(transparent)]
    Deps(#[from] crate::deps::DepsError),
    #[error("{0}")]
    Request(String),
}

impl RunError {
    /// Whose to fix: the request's, or the host's (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            RunError::Request(_) | RunError::Invalid(_) | RunError::Output(_) => ErrorKind::Request,
            RunError::Profile(ProfileError::Unknown(..)) => ErrorKind::Request,
            RunError::Deps(crate::deps::DepsError::Cache { .. }) => ErrorKind::Setup,
            RunError::Deps(_) => ErrorKind::Request,
            RunError::Launch(e) => e.kind(),
            RunError::Profile(_) => ErrorKind::Setup,
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub language: String,
    /// Source and data files for /workspace.
    pub files: Vec<InputFile>,
    /// The file to run (or compile); default: the profile's `source`.
    pub entry: Option<String>,
    /// The name of the file the code (the file with an empty path) came from, as
    /// `cordon run chart.py` gives it: kept as the entry point, so that the program sees its
    /// own name (argv[0], tracebacks, node's `.mjs`), when it is a name the profile can run
    /// ([`code_entry`]); else the code is the profile's `source`.
    pub code_name: Option<String>,
    pub args: Vec<String>,
    pub stdin: StdinSource,
    /// The result is to give the program's output in base64 (see
    /// [`crate::spec::SandboxSpec::exact_output`]).
    pub exact_output: bool,
    pub env: Vec<(String, String)>,
    /// Run-phase limits, on top of the profile's.
    pub limits: LimitOverrides,
    /// Compile-phase limits, on top of the profile's.
    pub compile_limits: LimitOverrides,
    /// Where to copy what the program wrote.
    pub output_dir: Option<PathBuf>,
    /// How the program reaches the network (default: it does not).
    pub network: crate::net::Network,
    /// Packages to install before the program runs (the profile's `[packages]` installer).
    pub packages: Vec<String>,
    /// The package index URL; default: the profile's.
    pub package_index: Option<String>,
    /// A lock file's contents (python: a requirements file, e.g. with `--hash`es; node: a
    /// package-lock.json): installed exactly, and part of the cached set's key.
    pub packages_lock: Option<Vec<u8>>,
    /// Host directories shown read-only to the program (`cordon run --ro-bind`; never from a
    /// request).
    pub binds: Vec<crate::spec::Bind>,
}

impl RunRequest {
    /// A request running `code` as the profile's source file.
    pub fn code(language: &str, code: &str) -> RunRequest {
        RunRequest {
            language: language.into(),
            files: vec![InputFile {
                path: String::new(),
                contents: code.as_bytes().to_vec(),
                mode: 0o644,
            }],
            ..RunRequest::default()
        }
    }
}

/// How to run it (the caller's environment rather than the request's content).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Extra profile files (`--profile`).
    pub profiles: Vec<PathBuf>,
    /// `--rootfs`: overrides the profile's choice.
    pub rootfs: Option<Rootfs>,
    pub degrade: Degrade,
    pub backend: BackendChoice,
    /// Copy output live to cordon's own stdout/stderr.
    pub passthrough: bool,
    /// Write output live to cordon's own stdout as JSON lines (`--stream`; see
    /// [`crate::spec::SandboxSpec::stream`]), in the request's output encoding.
    pub stream: bool,
    /// Use and fill the compile cache.
    pub cache: bool,
    /// Append a record to the history file.
    pub history: bool,
    /// Collect files the program wrote (always, when `output_dir` is set).
    pub collect: bool,
    /// Where a JSON request's `outputDir` may point (`--output-root`): a relative one is
    /// taken under it, an absolute one must be inside it. None: anywhere the caller may write.
    pub output_root: Option<PathBuf>,
    /// What network a JSON request may ask for (`--request-net`).
    pub request_net: RequestNet,
    /// The operator's limits for JSON requests, the program's and its compile's: the values
    /// of those a request leaves out, and ceilings for those it sets
    /// ([`confine_request_limits`]).
    pub request_limits: (LimitOverrides, LimitOverrides),
}

/// What network a JSON request may ask for (`cordon run --request-net`): the command line
/// and [`RunRequest`]s built in code are the operator's own and are not confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestNet {
    /// Whatever the request says.
    #[default]
    Any,
    /// `allow=` lists and package indexes that reach only public addresses: no IP literal of
    /// loopback, private, link-local, metadata or other special use, none of this host's own
    /// addresses, no `localhost`, no `--net-resolve` answer among them, no `host` network.
    /// (Names are checked by the proxy at each connection: one that resolves to such an
    /// address is refused unless a literal entry lists it, which this forbids.)
    Public,
    /// No network at all: `config.network` must be none, and no packages are installed.
    None,
}

impl RequestNet {
    /// The value `--request-net` takes for it.
    pub fn name(self) -> &'static str {
        match self {
            RequestNet::Any => "any",
            RequestNet::Public => "public",
            RequestNet::None => "none",
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            profiles: Vec::new(),
            rootfs: None,
            degrade: Degrade::default(),
            backend: BackendChoice::Auto,
            passthrough: false,
            stream: false,
            cache: true,
            history: true,
            collect: true,
            output_root: None,
            request_net: RequestNet::Any,
            request_limits: Default::default(),
        }
    }
}

/// Holds a JSON request to the operator's limits, `cordon run`'s limit flags given next to
/// `--request`/`--requests` (`run` for the program, `compile` for its compile): a limit the
/// request leaves out takes the operator's value, and one it sets may not be above it (an
/// operator's `0`, where 0 lifts a limit, lifts the ceiling). The limits a request cannot set
/// (file size, open files, the tmpfs sizes, the compile's memory and processes) are the
/// operator's as given.
pub fn confine_request_limits(
    r: &mut RunRequest,
    run: &LimitOverrides,
    compile: &LimitOverrides,
) -> Result<(), RunError> {
    // Every limit over its ceiling, the run's and the compile's, so that one answer names
    // them all: (the request's name and value, the operator's name and value).
    let mut over: Vec<(String, String)> = Vec::new();
    for (req, op) in [(&mut r.limits, run), (&mut r.compile_limits, compile)] {
        let mut theirs = Limits::default();
        op.apply(&mut theirs)?;
        let mut asked = Limits::default();
        req.apply(&mut asked)?;
        let (mut their_caps, mut asked_caps) = (Collect::default(), Collect::default());
        op.apply_collect(&mut their_caps)?;
        req.apply_collect(&mut asked_caps)?;
        let text = |v: &Option<String>| v.clone();
        let num = |v: Option<u64>| v.map(|n| n.to_string());
        let cpus = |v: Option<f64>| v.map(|c| c.to_string());
        // (the limit, the request's value and the operator's, whether it is within)
        let checks = [
            (
                "timeout",
                text(&req.timeout),
                text(&op.timeout),
                asked.wall <= theirs.wall,
            ),
            (
                "cpu_time",
                text(&req.cpu_time),
                text(&op.cpu_time),
                within(asked.cpu_time, theirs.cpu_time),
            ),
            (
                "memory",
                text(&req.memory),
                text(&op.memory),
                within(asked.memory, theirs.memory),
            ),
            (
                "cpus",
                cpus(req.cpus),
                cpus(op.cpus),
                within(asked.cpus, theirs.cpus),
            ),
            (
                "pids",
                num(req.pids),
                num(op.pids),
                within(asked.pids, theirs.pids),
            ),
            (
                "output_limit",
                text(&req.output_limit),
                text(&op.output_limit),
                asked.output <= theirs.output,
            ),
            (
                "collect_files",
                num(req.collect_files),
                num(op.collect_files),
                asked_caps.max_files <= their_caps.max_files,
            ),
            (
                "collect_size",
                text(&req.collect_size),
                text(&op.collect_size),
                asked_caps.max_bytes <= their_caps.max_bytes,
            ),
        ];
        for (key, mine, given, ok) in checks {
            if let (Some(mine), Some(given), false) = (mine, given, ok) {
                over.push((
                    format!("{} ({mine})", req.naming.name(key)),
                    format!("{} {given}", op.naming.name(key)),
                ));
            }
        }
        let fill = |mine: &mut Option<String>, given: &Option<String>| {
            if mine.is_none() {
                mine.clone_from(given);
            }
        };
        fill(&mut req.timeout, &op.timeout);
        fill(&mut req.cpu_time, &op.cpu_time);
        fill(&mut req.memory, &op.memory);
        fill(&mut req.output_limit, &op.output_limit);
        fill(&mut req.file_size, &op.file_size);
        fill(&mut req.workspace_size, &op.workspace_size);
        fill(&mut req.tmp_size, &op.tmp_size);
        fill(&mut req.collect_size, &op.collect_size);
        req.collect_files = req.collect_files.or(op.collect_files);
        req.cpus = req.cpus.or(op.cpus);
        req.pids = req.pids.or(op.pids);
        req.open_files = req.open_files.or(op.open_files);
        req.workspace_inodes = req.workspace_inodes.or(op.workspace_inodes);
    }
    match &over[..] {
        [] => Ok(()),
        [(mine, given)] => Err(RunError::Request(format!(
            "invalid request: {mine} is above this cordon's {given}; ask for at most that, or ask its operator to raise it"
        ))),
        _ => Err(RunError::Request(format!(
            "invalid request: {} limits are above this cordon's ceilings: {}; ask for at most those, or ask its operator to raise them",
            over.len(),
            over.iter()
                .map(|(mine, given)| format!("{mine} is above {given}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Whether a limit (`None`: none) is at most `ceiling` (`None`: no ceiling).
fn within<T: PartialOrd>(limit: Option<T>, ceiling: Option<T>) -> bool {
    match (limit, ceiling) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(l), Some(c)) => l <= c,
    }
}

/// Refuses a request that asks for more network than `scope` allows (see [`RequestNet`]).
pub fn confine_request_network(r: &RunRequest, scope: RequestNet) -> Result<(), RunError> {
    use crate::net::Network;
    use crate::net::policy::{HostPattern, classify};
    let refuse = |what: String| {
        Err(RunError::Request(format!(
            "invalid request: {what}; this cordon takes requests with --request-net {} ({}): ask its operator, or leave the network out of the request",
            scope.name(),
            match scope {
                RequestNet::Public => "public addresses only",
                _ => "no network and no packages",
            }
        )))
    };
    match scope {
        RequestNet::Any => Ok(()),
        RequestNet::None => {
            if r.network != Network::None {
                return refuse("config.network asks for network".into());
            }
            if !r.packages.is_empty() || r.packages_lock.is_some() {
                return refuse("packages need the network to install".into());
            }
            Ok(())
        }
        RequestNet::Public => {
            let own = crate::net::proxy::local_addresses()
                .map_err(|e| RunError::Request(format!("invalid request: {e}")))?;
            // Also an address a `local` route gives the host (AnyIP); an answer the kernel
            // would not give counts as the host's (fail closed).
            let special = |ip: std::net::IpAddr| {
                classify(ip).is_some()
                    || own.iter().any(|o| {
                        crate::net::policy::canonical(*o) == crate::net::policy::canonical(ip)
                    })
                    || crate::net::proxy::routed_to_this_host(ip).unwrap_or(true)
            };
            let check = |e: &crate::net::policy::Entry, field: &str| match &e.host {
                HostPattern::Ip(ip) if special(*ip) => {
                    refuse(format!("{field} names {e}, which is not a public address"))
                }
                HostPattern::Exact(n) if n == "localhost" => {
                    refuse(format!("{field} names localhost"))
                }
                _ => Ok(()),
            };
            match &r.network {
                Network::Host => {
                    return refuse("config.network asks for the host's network".into());
                }
                Network::Allow(a) => {
                    for e in &a.entries {
                        check(e, "config.network")?;
                    }
                    for (name, ip) in &a.overrides {
                        if special(*ip) {
                            return refuse(format!(
                                "config.networkResolve answers {name} with {ip}, which is not a public address"
                            ));
                        }
                    }
                }
                Network::None => {}
            }
            if let Some(url) = &r.package_index {
                let e = crate::deps::index_host(url)
                    .map_err(|e| RunError::Request(format!("invalid request: packageIndex {e}")))?;
                check(&e, "packageIndex")?;
            }
            Ok(())
        }
    }
}

/// A request's `outputDir` confined to `root` (see [`RunOptions::output_root`]): relative,
/// it is taken under `root`; absolute, it must be inside it; `..` is refused either way, and
/// so is `root` itself (the directory must be a new one below it: [`OutputDir::open_new_under`]).
///
/// [`OutputDir::open_new_under`]: crate::output::OutputDir::open_new_under
pub fn confine_output_dir(dir: &Path, root: &Path) -> Result<PathBuf, RunError> {
    use std::path::Component;
    let below = dir.strip_prefix(root).unwrap_or(dir);
    if !below
        .components()
        .any(|c| matches!(c, Component::Normal(_)))
    {
        return Err(RunError::Request(format!(
            "invalid request: outputDir {:?} names --output-root {} itself; give a new directory below it",
            dir.display().to_string(),
            root.display()
        )));
    }
    if dir.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(RunError::Request(format!(
            "invalid request: outputDir {} has a `..` component; give a directory under --output-root {}",
            dir.display(),
            root.display()
        )));
    }
    if dir.is_absolute() && !dir.starts_with(root) {
        return Err(RunError::Request(format!(
            "invalid request: outputDir {} is outside --output-root {}; give a path under it, or a relative one",
            dir.display(),
            root.display()
        )));
    }
    Ok(root.join(dir))
}

/// Which root filesystem a profile runs on: `--rootfs` first, then the profile's `rootfs`
/// (`auto`: the built rootfs of this language when there is one, else the host).
pub fn resolve_rootfs(profile: &Profile, over: Option<&Rootfs>) -> Rootfs {
    if let Some(r) = over {
        return r.clone();
    }
    match profile.rootfs.as_str() {
        "host" => Rootfs::Host,
        "auto" => crate::rootfs::find(&profile.name)
            .map(|b| Rootfs::Dir(b.path))
            .unwrap_or(Rootfs::Host),
        dir => Rootfs::Dir(PathBuf::from(dir)),
    }
}

/// Whether a directory root filesystem can be read, before anything is launched; the error
/// says where the directory came from (`--rootfs`, the profile's `rootfs`, or the built
/// rootfs that `auto` found) and what to do about it.
fn check_rootfs(profile: &Profile, over: Option<&Rootfs>, rootfs: &Rootfs) -> Result<(), RunError> {
    let Rootfs::Dir(dir) = rootfs else {
        return Ok(());
    };
    let Err(e) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let lang = &profile.name;
    let origin = match (over, profile.rootfs.as_str()) {
        (Some(_), _) => "the path given to --rootfs; check it".to_string(),
        (None, "auto") => format!(
            "the built rootfs that the {lang} profile's `rootfs = \"auto\"` found; rebuild it with `cordon rootfs build {lang}`, or give --rootfs host"
        ),
        (None, _) => format!(
            "the {lang} profile's `rootfs`; fix it in the profile (a --profile FILE or $XDG_CONFIG_HOME/cordon/profiles/{lang}.toml), or give --rootfs"
        ),
    };
    Err(RunError::Request(format!(
        "cannot read the root filesystem {}: {e}; it is {origin}",
        dir.display()
    )))
}

/// A stable identity of the toolchain: path, size and modification time of the compiler
/// binary as the sandbox will see it (a package upgrade changes them).
/// `path`: the PATH the sandbox finds it on ([`profile_path`]).
fn toolchain_identity(program: &str, rootfs: &Rootfs, path: &str) -> String {
    match crate::profile::resolve_on_host(program, rootfs, path, &[])
        .and_then(|p| std::fs::canonicalize(&p).ok())
    {
        Some(p) => {
            use std::os::unix::fs::MetadataExt;
            match std::fs::metadata(&p) {
                Ok(m) => format!(
                    "{}:{}:{}:{}",
                    p.display(),
                    m.size(),
                    m.mtime(),
                    m.mtime_nsec()
                ),
                Err(_) => format!("{program}:unreadable"),
            }
        }
        None => format!("{program}:not-found"),
    }
}

/// The compile cache's key: everything the artifact is made from — the compiler (its path,
/// size and mtime), its argv and environment, the root, and each file's name, mode and bytes
/// (a mode can change the build: an executable build script, a file only its owner reads).
fn compile_key(profile: &Profile, argv: &[String], rootfs: &Rootfs, files: &[InputFile]) -> Key {
    // A BTreeMap: in key order already.
    let env = &profile.compile_env;
    let mut parts: Vec<Vec<u8>> = vec![
        b"cordon-compile-v2".to_vec(),
        profile.name.as_bytes().to_vec(),
        argv.join("\0").into_bytes(),
        env.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("\0")
            .into_bytes(),
        toolchain_identity(&argv[0], rootfs, &profile_path(env)).into_bytes(),
        format!("{rootfs:?}").into_bytes(),
    ];
    let mut sorted: Vec<&InputFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    for f in sorted {
        parts.push(f.path.as_bytes().to_vec());
        parts.push(f.mode.to_le_bytes().to_vec());
        parts.push(f.contents.clone());
    }
    Key::new(&parts.iter().map(|p| p.as_slice()).collect::<Vec<_>>())
}

/// Debian's package for each built-in toolchain, for the fix in [`check_toolchain`].
const PACKAGES: &[(&str, &str)] = &[
    ("python3", "python3"),
    ("node", "nodejs"),
    ("go", "golang-go"),
    ("rustc", "rustc"),
    ("bash", "bash"),
];

/// Fails early, with the fix, when the program a profile needs is not where the sandbox will
/// look: on `--rootfs host` only /usr (and the /bin, /sbin, /lib* links) is visible, so a
/// toolchain under /root, /home or /opt (rustup, pyenv, nvm) is not there. `path` is the PATH
/// the sandbox looks on ([`profile_path`]) and `binds` the host directories it shows.
fn check_toolchain(
    program: &str,
    rootfs: &Rootfs,
    lang: &str,
    path: &str,
    binds: &[crate::spec::Bind],
) -> Result<(), RunError> {
    // A relative directory on the PATH is in the workspace, which only the run will have.
    if program.starts_with("./") || path.split(':').any(|d| !d.starts_with('/')) {
        return Ok(());
    }
    if crate::profile::resolve_on_host(program, rootfs, path, binds).is_some() {
        return Ok(());
    }
    let package = PACKAGES
        .iter()
        .find(|(p, _)| *p == program)
        .map(|(_, pkg)| *pkg)
        .unwrap_or(program);
    let elsewhere = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(program))
                .find(|c| c.is_file())
        })
        .unwrap_or_default();
    // Where it was looked for, when that is not the default.
    let on = if path == crate::spec::DEFAULT_PATH {
        String::new()
    } else {
        format!(" (looked for on the profile's PATH={path})")
    };
    let place = match (rootfs, elsewhere) {
        (Rootfs::Host, Some(p)) => format!(
            "`{program}` is at {}, outside what a --rootfs host sandbox sees (/usr, /bin, /sbin, /lib*){on}",
            p.display()
        ),
        (Rootfs::Host, None) => format!("`{program}` is not installed under /usr{on}"),
        (Rootfs::Dir(d), _) => format!(
            "`{program}` is not in the root filesystem {}{on}",
            d.display()
        ),
    };
    // Only a language cordon has a rootfs recipe for can be built (a --profile's cannot).
    let build = if crate::rootfs::recipe(lang).is_some() {
        format!(" or build the language's root filesystem (`cordon rootfs build {lang}`)")
    } else {
        " or give a root filesystem that has it (the profile's `rootfs`, or --rootfs DIR)"
            .to_string()
    };
    Err(RunError::Request(format!(
        "the {lang} toolchain is missing: {place}; install Debian's package (`apt-get install {package}`){build}"
    )))
}

fn base_spec(
    argv: Vec<String>,
    rootfs: &Rootfs,
    opts: &RunOptions,
    profile: &Profile,
) -> SandboxSpec {
    let mut s = SandboxSpec::new(argv);
    s.rootfs = rootfs.clone();
    s.degrade = opts.degrade;
    s.backend = opts.backend;
    s.seccomp_policy = profile.seccomp.clone();
    s
}

/// The PATH a profile's commands (interpreter, compiler, the built program) are found on:
/// the one its environment (`env`, or `compile_env` for the compiler) sets, else the
/// sandbox's default. A request's `env` and `--env` do not change it: they are the
/// program's environment, not where cordon finds what runs it.
pub(crate) fn profile_path(profile_env: &BTreeMap<String, String>) -> String {
    profile_env
        .get("PATH")
        .map_or_else(|| crate::spec::DEFAULT_PATH.to_string(), String::clone)
}

fn limits_with(over: &[&LimitOverrides]) -> Result<Limits, ParseError> {
    let mut l = Limits::default();
    for o in over {
        o.apply(&mut l)?;
    }
    Ok(l)
}

/// The entry point goes into the interpreter's or compiler's command line as it is: a name
/// starting with `-` would be read as an option (`go build -toolexec=...` runs a program of
/// the request's at compile time, outside the run's limits) and one starting with `@` as a
/// file of arguments (rustc's `@args`).
fn check_entry(entry: &str) -> Result<(), RunError> {
    crate::spec::check_relative_path(entry)?;
    if entry.starts_with(['-', '@']) {
        return Err(RunError::Request(format!(
            "invalid request: the entry point {:?} starts with `{}`, which the interpreter or compiler would read as an option; rename the file",
            entry.escape_debug().to_string(),
            &entry[..1]
        )));
    }
    Ok(())
}

/// The entry point for code that came from a file named `name` ([`RunRequest::code_name`]):
/// its name when it is a valid entry point and, for a profile that compiles, has the
/// extension of the profile's `source` (`go build` takes only `.go` files); None (the
/// profile's `source`) otherwise.
fn code_entry(name: &str, profile: &crate::profile::Profile) -> Option<String> {
    let ext = |n: &str| std::path::Path::new(n).extension().map(|e| e.to_owned());
    // `go build` takes a `_test.go` file for a test, with no program in it.
    let fits = (profile.compile.is_none() || ext(name) == ext(&profile.source))
        && !(name.ends_with("_test.go") && profile.source.ends_with(".go"));
    (fits && !name.contains('/') && check_entry(name).is_ok()).then(|| name.to_string())
}

/// The input cap ([`MAX_INPUT_BYTES`]) over the code and files (and a request's stdin), in
/// the words of whoever gave them: a JSON request's `code`, `files` and `stdin`, or the
/// command line's code and `--file`s.
fn check_input_size(
    files: &[InputFile],
    stdin: &StdinSource,
    naming: LimitNaming,
) -> Result<(), RunError> {
    let stdin = match stdin {
        StdinSource::Bytes(b) => b.len() as u64,
        _ => 0,
    };
    let total: u64 = files.iter().map(|f| f.contents.len() as u64).sum::<u64>() + stdin;
    if total <= MAX_INPUT_BYTES {
        return Ok(());
    }
    let cap = MAX_INPUT_BYTES >> 20;
    Err(RunError::Request(match naming {
        LimitNaming::Request | LimitNaming::CompileRequest => format!(
            "the request's code, files and stdin exceed {cap} MiB ({total} bytes); send less data in the request (split the job, or let the program fetch its data over config.network)"
        ),
        _ => format!(
            "the code and the --file files exceed {cap} MiB ({total} bytes); give fewer or smaller --file files, or split the job (`--ro-bind DIR:/data` shows a directory to the program without copying it)"
        ),
    }))
}

/// Runs one request to completion.
pub fn execute(req: &RunRequest, opts: &RunOptions) -> Result<Outcome, RunError> {
    let profile = crate::profile::find(&req.language, &opts.profiles)?;
    let entry = req
        .entry
        .clone()
        .or_else(|| code_entry(req.code_name.as_deref()?, &profile))
        .unwrap_or_else(|| profile.source.clone());
    check_entry(&entry)?;
    let mut files = req.files.clone();
    for f in &mut files {
        if f.path.is_empty() {
            f.path = entry.clone();
        }
    }
    check_input_size(&files, &req.stdin, req.limits.naming)?;
    if !files.iter().any(|f| f.path == entry) {
        return Err(RunError::Request(format!(
            "no file named `{entry}` to run: give code (-c, a FILE, or `code`), or name an existing file as the entry point"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        if !seen.insert(f.path.as_str()) {
            return Err(RunError::Request(if f.path == entry {
                format!(
                    "file `{}` is given twice: it is the code to run, and another file has its name; rename that file",
                    f.path
                )
            } else {
                format!("file `{}` is given twice; give each file once", f.path)
            }));
        }
    }
    // The caps on what the run phase brings back from /workspace (the compile's collection,
    // of its artifact alone, keeps the defaults).
    let mut collect = Collect {
        // The result lists names and sizes; only an output directory needs the contents.
        contents: req.output_dir.is_some(),
        ..Collect::default()
    };
    for o in [&profile.limits, &req.limits] {
        o.apply_collect(&mut collect)?;
    }
    // Opened (and made) once the request is known to be valid, before anything runs: a bad
    // directory is reported now, not after the run, and a symlink put in its place meanwhile
    // cannot redirect the files.
    let output_dir = match (&req.output_dir, &opts.output_root) {
        (Some(d), Some(root)) => {
            let d = confine_output_dir(d, root)?;
            let rel = d.strip_prefix(root).unwrap_or(&d);
            Some(crate::output::OutputDir::open_new_under(root, rel)?)
        }
        (Some(d), None) => Some(crate::output::OutputDir::open(d)?),
        (None, _) => None,
    };
    let code_length = files
        .iter()
        .find(|f| f.path == entry)
        .map(|f| f.contents.len() as u64)
        .unwrap_or(0);
    let rootfs = resolve_rootfs(&profile, opts.rootfs.as_ref());
    check_rootfs(&profile, opts.rootfs.as_ref(), &rootfs)?;
    if let Some(compile) = &profile.compile {
        let program = &profile.expand(compile, &entry)[0];
        let path = profile_path(&profile.compile_env);
        check_toolchain(program, &rootfs, &profile.name, &path, &[])?;
    }
    let program = &profile.expand(&profile.run, &entry)[0];
    let path = profile_path(&profile.env);
    check_toolchain(program, &rootfs, &profile.name, &path, &req.binds)?;

    // `--stream`: every phase that runs streams its output; the compile's and the install's
    // pieces are wrapped in their phase's name, and are text whatever the output encoding
    // (the result keeps their output as text).
    let stream = opts.stream.then_some(if req.exact_output {
        crate::outcome::OutputEncoding::Base64
    } else {
        crate::outcome::OutputEncoding::Utf8
    });

    // Compile phase (cached), for compiled languages.
    let mut compile_report = None;
    let mut run_files = files.clone();
    if let (Some(compile), Some(artifact)) = (&profile.compile, &profile.artifact) {
        let argv = profile.expand(compile, &entry);
        let key = compile_key(&profile, &argv, &rootfs, &files);
        let cache = if opts.cache {
            match Cache::open(Cache::default_dir(), CACHE_MAX_BYTES) {
                Ok(c) => Some(c),
                Err(e) => {
                    eprintln!("cordon: warning: compiling without the cache: {e}");
                    None
                }
            }
        } else {
            None
        };
        let hit = cache.as_ref().and_then(|c| c.get(&key));
        let art = match hit {
            Some(mut a) => {
                compile_report = Some(CompileReport {
                    status: Status::Ok,
                    cached: true,
                    exit_code: Some(0),
                    output: std::mem::take(&mut a.output),
                    error: std::mem::take(&mut a.error),
                    execution_time: 0.0,
                    // Nothing ran: no figure, and no source that could have given one.
                    cpu_time: None,
                    cpu_time_source: MetricSource::Unavailable,
                    memory_used: None,
                    memory_used_source: MetricSource::Unavailable,
                });
                a
            }
            None => {
                let mut s = base_spec(argv, &rootfs, opts, &profile);
                s.env = profile
                    .compile_env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                s.command_path = Some(profile_path(&profile.compile_env));
                s.limits = limits_with(&[&profile.compile_limits, &req.compile_limits])?;
                s.limit_naming = req.compile_limits.naming;
                s.stdin = StdinSource::Null;
                // A compile error's result holds the compiler's output in its place.
                s.exact_output = req.exact_output;
                // The result keeps a compile's output as text: so do its pieces.
                s.stream = stream.map(|_| crate::outcome::OutputEncoding::Utf8);
                s.stream_phase = Some("compile");
                s.files = files.clone();
                s.collect = Some(Collect {
                    only: Some(vec![artifact.clone()]),
                    ..Collect::default()
                });
                let out = crate::launch::run(&s)?;
                let report = CompileReport {
                    status: match out.status {
                        Status::Ok | Status::RuntimeError | Status::Signaled => {
                            Status::CompileError
                        }
                        other => other,
                    },
                    cached: false,
                    exit_code: out.exit_code,
                    output: out.output.clone(),
                    error: out.error.clone(),
                    execution_time: out.execution_time,
                    cpu_time: out.cpu_time,
                    cpu_time_source: out.cpu_time_source,
                    memory_used: out.memory_used,
                    memory_used_source: out.memory_used_source,
                };
                let produced = out.files.iter().flatten().find(|f| &f.path == artifact);
                match (out.status, produced) {
                    (Status::Ok, Some(f)) => {
                        // The compiler's messages (warnings) stay with the artifact, so that a
                        // cached run reports them as this one does.
                        let a = Artifact {
                            bytes: f.data.clone(),
                            mode: f.mode | 0o500,
                            output: report.output.clone(),
                            error: report.error.clone(),
                        };
                        if let Some(c) = &cache {
                            // A cache that cannot be written only costs the next run a compile.
                            let _ = c.put(&key, &a);
                        }
                        compile_report = Some(CompileReport {
                            status: Status::Ok,
                            ..report
                        });
                        a
                    }
                    (status, _) => {
                        let mut failed = out;
                        let missing = status == Status::Ok;
                        failed.status = report.status;
                        if missing {
                            failed.status = Status::CompileError;
                            failed.message = Some(format!(
                                "the compiler exited 0 but wrote no `{artifact}`; check the profile's `compile` and `artifact`"
                            ));
                        } else if failed.status == Status::CompileError {
                            failed.message = Some(match (failed.exit_code, failed.message.take()) {
                                // Not found or not executable: the compiler printed nothing.
                                (Some(126 | 127), Some(why)) => {
                                    format!("the compiler could not be started: {why}")
                                }
                                _ => "compilation failed; the compiler's messages are in `compile.error` (on stderr without --json)".into(),
                            });
                        }
                        failed.success = false;
                        failed.cli_exit_code = if failed.status == Status::CompileError {
                            1
                        } else {
                            failed.cli_exit_code
                        };
                        failed.files = Some(Vec::new());
                        failed.directories.clear();
                        failed.compile = Some(report);
                        failed.language = Some(profile.name.clone());
                        return Ok(finish(failed, &profile, code_length, opts));
                    }
                }
            }
        };
        run_files.push(InputFile {
            path: artifact.clone(),
            contents: art.bytes,
            mode: art.mode & 0o777,
        });
    }

    // Dependencies (`--packages`): from the cache, or installed in a sandbox of their own
    // whose network reaches the registry only.
    let mut deps = None;
    if !req.packages.is_empty() || req.packages_lock.is_some() {
        // The install sandbox shows none of the run's --ro-bind directories (a package's
        // install script, which reaches the registry, must not read the caller's data), so
        // an interpreter found only through one cannot install for itself.
        let interpreter = &profile.expand(&profile.run, &entry)[0];
        let path = profile_path(&profile.env);
        let seen = crate::profile::resolve_on_host(interpreter, &rootfs, &path, &req.binds);
        if seen.is_some()
            && seen != crate::profile::resolve_on_host(interpreter, &rootfs, &path, &[])
        {
            return Err(RunError::Request(format!(
                "--packages: the profile's `{interpreter}` is in a --ro-bind directory ({}), which a package install does not see; install the packages into that environment on the host, or use an interpreter of the root filesystem",
                seen.unwrap_or_default().display()
            )));
        }
        let mut base = base_spec(Vec::new(), &rootfs, opts, &profile);
        base.limit_naming = req.limits.naming;
        // The installer runs the interpreter the program will run on.
        let path = profile_path(&profile.env);
        base.command_path = Some(path.clone());
        // As text, as the result keeps an install's output.
        base.stream = stream.map(|_| crate::outcome::OutputEncoding::Utf8);
        base.stream_phase = Some("dependencies");
        let identity = |p: &str| toolchain_identity(p, &rootfs, &path);
        match crate::deps::prepare(
            &profile,
            &req.packages,
            req.packages_lock.as_deref(),
            req.package_index.as_deref(),
            &rootfs,
            &base,
            &identity,
        )? {
            crate::deps::Prepared::Failed(o) => {
                let mut o = *o;
                o.language = Some(profile.name.clone());
                o.compile = compile_report;
                return Ok(finish(o, &profile, code_length, opts));
            }
            crate::deps::Prepared::Ready(r) => deps = Some(*r),
        }
    } else if req.package_index.is_some() {
        return Err(RunError::Request(
            "--package-index needs --packages or --packages-lock".into(),
        ));
    }

    // Run phase.
    let mut argv = profile.expand(&profile.run, &entry);
    argv.extend(req.args.iter().cloned());
    let mut s = base_spec(argv, &rootfs, opts, &profile);
    s.env = profile
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut deps_report = None;
    if let Some(d) = deps {
        s.env.push(d.env);
        s.binds.extend(d.binds);
        deps_report = Some(d.report);
    }
    s.binds.extend(req.binds.iter().cloned());
    // The interpreter (or the built program) is found on the profile's PATH; the request's
    // own PATH, if it sets one, is only the program's.
    s.command_path = Some(profile_path(&profile.env));
    s.env.extend(req.env.iter().cloned());
    s.limits = limits_with(&[&profile.limits, &req.limits])?;
    s.limit_naming = req.limits.naming;
    s.stdin = req.stdin.clone();
    s.exact_output = req.exact_output;
    s.passthrough = opts.passthrough;
    s.stream = stream;
    s.files = run_files;
    s.network = req.network.clone();
    if opts.collect || req.output_dir.is_some() {
        s.collect = Some(collect);
    }
    let mut out = crate::launch::run(&s)?;
    out.compile = compile_report;
    out.dependencies = deps_report;
    out.language = Some(profile.name.clone());
    if out.status == crate::Status::RuntimeError && out.message.is_none() {
        out.message = missing_module_hint(&out.error, &profile, req, &rootfs)
            .or_else(|| shadow_hint(&out.error, out.dependencies.as_ref()?, req));
    }
    if let Some(dir) = &output_dir {
        dir.deliver(&mut out);
    }
    Ok(finish(out, &profile, code_length, opts))
}

/// The module a failed program could not import, from its stderr: Python's
/// `ModuleNotFoundError: No module named 'X'` (X's top-level name) or Node's
/// `Cannot find module 'X'` (require) or `Cannot find package 'X' imported from ...` (an ES
/// module's import) (a package name, `@scope/name` or `name`; not a relative or absolute
/// path). The last such line: the one that ended the program.
fn missing_module(stderr: &str, installer: &str) -> Option<String> {
    let python = match installer {
        "pip" => true,
        "npm" => false,
        _ => return None,
    };
    // The error that ended the program, not one it caught earlier: Python's traceback ends
    // on it; Node's last error line (`SomethingError: ...`, or `Error [CODE]: ...`) is it,
    // with the require stack and the `code:` lines after it.
    let ending = |l: &&str| {
        let t = l.trim_start();
        t.split_once(": ").is_some_and(|(kind, _)| {
            let (kind, code) = match kind.split_once(" [") {
                Some((k, c)) => (k, c.strip_suffix(']')),
                None => (kind, Some("ERR")),
            };
            kind.ends_with("Error")
                && kind.chars().all(|c| c.is_ascii_alphanumeric())
                && code.is_some_and(|c| c.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        })
    };
    let line = if python {
        stderr.lines().rev().find(|l| !l.trim().is_empty())?
    } else {
        stderr.lines().rev().find(ending)?
    };
    let line = line.trim_start();
    // The whole line is the one error: `No module named 'os.x'; 'os' is not a package` is
    // not a missing package.
    let name = if python {
        line.strip_prefix("ModuleNotFoundError: No module named '")?
            .strip_suffix('\'')
    } else if let Some(rest) = line.strip_prefix("Error: Cannot find module '") {
        rest.strip_suffix('\'')
    } else {
        line.strip_prefix("Error [ERR_MODULE_NOT_FOUND]: Cannot find package '")?
            .split_once("' imported from ")
            .map(|(name, _)| name)
    }
    .filter(|n| !n.contains('\''))?;
    let name = if python {
        name.split('.').next()?.to_string()
    } else if name.starts_with('@') {
        name.splitn(3, '/').take(2).collect::<Vec<_>>().join("/")
    } else {
        name.split('/').next()?.to_string()
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.@/".contains(c);
    (!name.is_empty() && !name.starts_with(['.', '/']) && name.chars().all(plain)).then_some(name)
}

/// For a run that failed on a missing module of a language with packages: where it can come
/// from. The program's own module first (a file the caller did not send: installing a
/// package of that name from the registry would run whoever's code holds the name there),
/// then the registry's package (PyPI's name where it is another), or the python rootfs,
/// which has the common data libraries.
fn missing_module_hint(
    stderr: &str,
    profile: &Profile,
    req: &RunRequest,
    rootfs: &Rootfs,
) -> Option<String> {
    let cfg = profile.packages.as_ref()?;
    let name = missing_module(stderr, &cfg.installer)?;
    if req.packages.iter().any(|p| p == &name) {
        return None;
    }
    // The usual Python modules whose package on PyPI has another name.
    const PYPI_NAMES: &[(&str, &str)] = &[
        ("sklearn", "scikit-learn"),
        ("skimage", "scikit-image"),
        ("cv2", "opencv-python-headless"),
        ("PIL", "pillow"),
        ("yaml", "pyyaml"),
        ("bs4", "beautifulsoup4"),
        ("dateutil", "python-dateutil"),
        ("docx", "python-docx"),
        ("pptx", "python-pptx"),
        ("Crypto", "pycryptodome"),
        ("dotenv", "python-dotenv"),
    ];
    let pip = cfg.installer == "pip";
    let package = PYPI_NAMES
        .iter()
        .find(|(m, _)| pip && *m == name)
        .map_or(name.as_str(), |(_, p)| p);
    if req.packages.iter().any(|p| p == package) {
        return None;
    }
    let request = matches!(
        req.limits.naming,
        LimitNaming::Request | LimitNaming::CompileRequest
    );
    let registry = match cfg.installer.as_str() {
        "pip" => "PyPI",
        "npm" => "npm",
        other => other,
    };
    // The program's own module: a file beside the code (Python finds it there), or for
    // Node one loaded by its path (a bare name is looked up in node_modules only).
    let own = match (pip, request) {
        (true, false) => format!(
            "if it is the program's own module, send it with --file {name}.py=PATH (a package: --file {name}/__init__.py=PATH, and its other files likewise)"
        ),
        (true, true) => format!(
            "if it is the program's own module, send it in the request's `files` as \"{name}.py\" (a package: \"{name}/__init__.py\" and its other files)"
        ),
        (false, false) => format!(
            "if it is the program's own module, send it with --file {name}.js=PATH and load it by its path (`require('./{name}')`, `import './{name}.js'`)"
        ),
        (false, true) => format!(
            "if it is the program's own module, send it in the request's `files` as \"{name}.js\" and load it by its path (`require('./{name}')`, `import './{name}.js'`)"
        ),
    };
    let option = if request {
        format!("\"packages\": [\"{package}\"] in the request")
    } else {
        format!("--packages {package}")
    };
    let differ = if package == name {
        " (the package's name may differ from the module's)".to_string()
    } else {
        format!(" ({registry}'s name for `{name}`)")
    };
    let rootfs_hint = if profile.name == "python" && *rootfs == Rootfs::Host {
        "; or build the python root filesystem (`cordon rootfs build python`), which has numpy, pandas and matplotlib"
    } else {
        ""
    };
    // A scoped npm name (`@scope/pkg`) is a registry package, never a file of the program.
    if name.starts_with('@') {
        return Some(format!(
            "the program failed to import `{name}`, which is not installed in its root filesystem: install it with {option}"
        ));
    }
    Some(format!(
        "the program failed to import `{name}`, which is neither among the program's files nor installed in its root filesystem: {own}; if it is a package from {registry}, install it with {option}{differ}{rootfs_hint}"
    ))
}

/// For a run that failed on a binary incompatibility (an extension module that does not fit
/// the version of a package it was built against) while its package set shadows root
/// filesystem packages at other versions: which, and what to do.
fn shadow_hint(
    stderr: &str,
    deps: &crate::outcome::DependencyReport,
    req: &RunRequest,
) -> Option<String> {
    if deps.shadowed.is_empty() {
        return None;
    }
    let line = crate::deps::binary_incompatibility(stderr)?;
    let line: String = line.chars().take(200).collect();
    // The shadowings that leave root filesystem packages with another version than theirs;
    // else those the error names; else all.
    let mut culprits: Vec<_> = deps
        .shadowed
        .iter()
        .filter(|s| !s.dependents.is_empty())
        .collect();
    if culprits.is_empty() {
        culprits = deps
            .shadowed
            .iter()
            .filter(|s| stderr.to_lowercase().contains(&s.name))
            .collect();
    }
    if culprits.is_empty() {
        culprits = deps.shadowed.iter().collect();
    }
    let option = match req.limits.naming {
        LimitNaming::Request | LimitNaming::CompileRequest => "`packages`",
        _ => "--packages",
    };
    let which: Vec<String> = culprits
        .iter()
        .map(|s| {
            let users = if s.dependents.is_empty() {
                String::new()
            } else {
                format!(
                    ", which the root filesystem's {} {} on",
                    s.dependents.join(", "),
                    if s.dependents.len() == 1 {
                        "depends"
                    } else {
                        "depend"
                    }
                )
            };
            format!(
                "{} {} from {option} shadows the root filesystem's {} {}{users}",
                s.name, s.version, s.name, s.rootfs_version
            )
        })
        .collect();
    let pins: Vec<String> = culprits
        .iter()
        .map(|s| {
            let v = s
                .rootfs_version
                .split('+')
                .next()
                .unwrap_or(&s.rootfs_version);
            format!("{}=={v}", s.name)
        })
        .collect();
    Some(format!(
        "the program failed on a binary incompatibility (\"{line}\"): {}; add the packages the program imports from the root filesystem to {option} too (pip then installs versions that fit), or pin {} in {option} to keep the root filesystem's version (`dependencies.shadowed` in the JSON result lists them all)",
        which.join("; "),
        pins.join(", ")
    ))
}

/// A run's figure with its compile's added (the history's times include the compile); None
/// when either is unknown. A compile served from the cache adds nothing.
fn with_compile(
    run: Option<f64>,
    compile: Option<&CompileReport>,
    of: impl Fn(&CompileReport) -> Option<f64>,
) -> Option<f64> {
    match compile {
        Some(c) if !c.cached => Some(crate::outcome::round_ms(run? + of(c)?)),
        _ => run,
    }
}

/// Gives the run its id and records it in the history.
fn finish(mut out: Outcome, profile: &Profile, code_length: u64, opts: &RunOptions) -> Outcome {
    let id = Record::new_id();
    out.execution_id = Some(id.clone());
    if opts.history {
        let rec = Record {
            execution_id: id,
            timestamp: crate::history::now_rfc3339(),
            language: profile.name.clone(),
            code_length,
            success: out.success,
            status: out.status.as_str().into(),
            exit_code: out.exit_code,
            signal: out.signal_name.clone(),
            compile_cached: out.compile.as_ref().map(|c| c.cached),
            execution_time: with_compile(Some(out.execution_time), out.compile.as_ref(), |c| {
                Some(c.execution_time)
            })
            .unwrap_or(out.execution_time),
            cpu_time: with_compile(out.cpu_time, out.compile.as_ref(), |c| c.cpu_time),
            memory_used: out.memory_used,
        };
        if let Err(e) = History::open_default().and_then(|h| h.append(&rec)) {
            eprintln!("cordon: warning: the run was not recorded in the history: {e}");
        }
    }
    out
}

/// Reads `--file NAME=PATH` arguments into input files (mode kept: executable bits only).
pub fn read_input_file(arg: &str) -> Result<InputFile, RunError> {
    let (name, path) = arg.split_once('=').ok_or_else(|| {
        RunError::Request(format!(
            "--file `{arg}`: write it as NAME=PATH (NAME is the file's path in /workspace)"
        ))
    })?;
    crate::spec::check_relative_path(name)?;
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let cannot =
        |e: std::io::Error| RunError::Request(format!("--file {name}: cannot read {path}: {e}"));
    // Opened without blocking (a FIFO would wait for a writer), then checked on the opened
    // file: only a regular file, and never more than the input cap (/dev/zero never ends).
    // Checked before it is opened (opening a device can act on it), and again on the opened
    // file, which must be the one checked.
    let before = std::fs::metadata(path).map_err(cannot)?;
    let not_regular = || RunError::Request(format!("--file {name}: {path} is not a regular file"));
    if !before.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    use std::os::unix::fs::MetadataExt;
    if !meta.is_file() || (meta.dev(), meta.ino()) != (before.dev(), before.ino()) {
        return Err(not_regular());
    }
    let mut contents = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut contents)
        .map_err(cannot)?;
    if contents.len() as u64 > MAX_INPUT_BYTES {
        return Err(RunError::Request(format!(
            "--file {name}: {path} is over the {MAX_INPUT_BYTES}-byte input cap (`--ro-bind DIR:/data` shows a directory to the program without copying it)"
        )));
    }
    let mode = if meta.permissions().mode() & 0o111 != 0 {
        0o755
    } else {
        0o644
    };
    Ok(InputFile {
        path: name.into(),
        contents,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile's commands are found on the PATH its own environment sets, else the
    /// default one, whatever the request's environment says.
    #[test]
    fn a_profiles_commands_are_found_on_its_own_path() {
        assert_eq!(profile_path(&BTreeMap::new()), crate::spec::DEFAULT_PATH);
        let env = |path: &str| {
            BTreeMap::from([
                ("PYTHONPATH".to_string(), "/deps".to_string()),
                ("PATH".to_string(), path.to_string()),
            ])
        };
        assert_eq!(
            profile_path(&env("/opt/py/bin:/usr/bin")),
            "/opt/py/bin:/usr/bin"
        );
    }

    #[test]
    fn errors_say_whose_they_are() {
        let request = [
            RunError::Request("x".into()),
            RunError::Profile(ProfileError::Unknown("cobol".into(), "python".into())),
            RunError::Deps(crate::deps::DepsError::Invalid("x".into())),
        ];
        for e in request {
            assert_eq!(e.kind(), ErrorKind::Request, "{e}");
        }
        let setup = [
            RunError::Profile(ProfileError::Invalid {
                origin: "p.toml".into(),
                message: "x".into(),
            }),
            RunError::Deps(crate::deps::DepsError::Cache {
                path: "/c".into(),
                reason: "x".into(),
            }),
        ];
        for e in setup {
            assert_eq!(e.kind(), ErrorKind::Setup, "{e}");
        }
    }

    #[test]
    fn the_historys_times_include_a_compile_that_ran() {
        let compile = |cached: bool, cpu: Option<f64>| CompileReport {
            status: crate::outcome::Status::Ok,
            cached,
            exit_code: Some(0),
            output: String::new(),
            error: String::new(),
            execution_time: 400.0,
            cpu_time: cpu,
            cpu_time_source: MetricSource::CgroupV1,
            memory_used: None,
            memory_used_source: MetricSource::Unavailable,
        };
        let cpu = |c: &CompileReport| c.cpu_time;
        assert_eq!(
            with_compile(Some(5.0), Some(&compile(false, Some(225.0))), cpu),
            Some(230.0)
        );
        // From the cache: nothing compiled, nothing added.
        assert_eq!(
            with_compile(Some(5.0), Some(&compile(true, None)), cpu),
            Some(5.0)
        );
        // Either unknown: the sum is.
        assert_eq!(
            with_compile(Some(5.0), Some(&compile(false, None)), cpu),
            None
        );
        assert_eq!(
            with_compile(None, Some(&compile(false, Some(1.0))), cpu),
            None
        );
        assert_eq!(with_compile(Some(5.0), None, cpu), Some(5.0));
    }

    #[test]
    fn the_operators_limits_fill_and_cap_a_request() {
        let flags = |timeout: &str, memory: &str| LimitOverrides {
            timeout: Some(timeout.into()),
            memory: Some(memory.into()),
            file_size: Some("1M".into()),
            naming: LimitNaming::Flags,
            ..LimitOverrides::default()
        };
        let request = |timeout: Option<&str>, memory: Option<&str>| RunRequest {
            limits: LimitOverrides {
                timeout: timeout.map(Into::into),
                memory: memory.map(Into::into),
                naming: LimitNaming::Request,
                ..LimitOverrides::default()
            },
            ..RunRequest::default()
        };
        let compile = LimitOverrides {
            naming: LimitNaming::CompileFlags,
            ..LimitOverrides::default()
        };
        // Left out: the operator's; within: the request's; limits a request cannot set: the
        // operator's.
        let mut r = request(None, Some("64M"));
        confine_request_limits(&mut r, &flags("2s", "128M"), &compile).unwrap();
        assert_eq!(r.limits.timeout.as_deref(), Some("2s"));
        assert_eq!(r.limits.memory.as_deref(), Some("64M"));
        assert_eq!(r.limits.file_size.as_deref(), Some("1M"));
        // Above: refused, naming both.
        let e = confine_request_limits(
            &mut request(Some("5000ms"), None),
            &flags("2s", "0"),
            &compile,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("config.timeout (5000ms)") && e.contains("--timeout 2s"),
            "{e}"
        );
        let e = confine_request_limits(
            &mut request(None, Some("256M")),
            &flags("2s", "128M"),
            &compile,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("config.memoryLimit") && e.contains("--memory 128M"),
            "{e}"
        );
        // The operator's 0 lifts the ceiling (and, left out, the limit).
        let mut r = request(None, Some("4096M"));
        confine_request_limits(&mut r, &flags("2s", "0"), &compile).unwrap();
        assert_eq!(r.limits.memory.as_deref(), Some("4096M"));
        let mut r = request(None, None);
        confine_request_limits(&mut r, &flags("2s", "0"), &compile).unwrap();
        let mut l = Limits::default();
        r.limits.apply(&mut l).unwrap();
        assert_eq!(l.memory, None);
        // The compile phase's ceiling is its own flag.
        let mut r = RunRequest {
            compile_limits: LimitOverrides {
                timeout: Some("90000ms".into()),
                naming: LimitNaming::CompileRequest,
                ..LimitOverrides::default()
            },
            ..RunRequest::default()
        };
        let compile = LimitOverrides {
            timeout: Some("1m".into()),
            naming: LimitNaming::CompileFlags,
            ..LimitOverrides::default()
        };
        let e = confine_request_limits(&mut r, &LimitOverrides::default(), &compile)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("config.compileTimeout") && e.contains("--compile-timeout 1m"),
            "{e}"
        );
    }

    /// A request over several ceilings, the run's and the compile's, is told of them all in
    /// one answer, each with its value and the ceiling.
    #[test]
    fn every_limit_over_its_ceiling_is_named_at_once() {
        let mut r = RunRequest {
            limits: LimitOverrides {
                timeout: Some("60000ms".into()),
                memory: Some("512M".into()),
                pids: Some(10),
                naming: LimitNaming::Request,
                ..LimitOverrides::default()
            },
            compile_limits: LimitOverrides {
                timeout: Some("90000ms".into()),
                naming: LimitNaming::CompileRequest,
                ..LimitOverrides::default()
            },
            ..RunRequest::default()
        };
        let run = LimitOverrides {
            timeout: Some("10s".into()),
            memory: Some("256M".into()),
            pids: Some(64),
            naming: LimitNaming::Flags,
            ..LimitOverrides::default()
        };
        let compile = LimitOverrides {
            timeout: Some("1m".into()),
            naming: LimitNaming::CompileFlags,
            ..LimitOverrides::default()
        };
        let e = confine_request_limits(&mut r, &run, &compile)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid request: 3 limits are above"), "{e}");
        for part in [
            "config.timeout (60000ms) is above --timeout 10s",
            "config.memoryLimit (512M) is above --memory 256M",
            "config.compileTimeout (90000ms) is above --compile-timeout 1m",
            "ask its operator to raise them",
        ] {
            assert!(e.contains(part), "{part:?} in {e}");
        }
        // The pids within their ceiling are not named.
        assert!(!e.contains("pids"), "{e}");
    }

    /// --collect-files and --collect-size next to a request are its default and its
    /// ceiling, as the limit flags are; without them a request may ask for any cap in bounds.
    #[test]
    fn the_operators_collection_caps_fill_and_cap_a_request() {
        let flags = |files: Option<u64>, size: Option<&str>| LimitOverrides {
            collect_files: files,
            collect_size: size.map(Into::into),
            naming: LimitNaming::Flags,
            ..LimitOverrides::default()
        };
        let request = |files: Option<u64>, size: Option<&str>| RunRequest {
            limits: LimitOverrides {
                collect_files: files,
                collect_size: size.map(Into::into),
                naming: LimitNaming::Request,
                ..LimitOverrides::default()
            },
            ..RunRequest::default()
        };
        let compile = LimitOverrides {
            naming: LimitNaming::CompileFlags,
            ..LimitOverrides::default()
        };
        let caps = |r: &RunRequest| {
            let mut c = Collect::default();
            r.limits.apply_collect(&mut c).unwrap();
            (c.max_files, c.max_bytes)
        };
        // Left out: the operator's; within: the request's.
        let mut r = request(None, None);
        confine_request_limits(&mut r, &flags(Some(50), Some("1M")), &compile).unwrap();
        assert_eq!(caps(&r), (50, 1 << 20));
        let mut r = request(Some(20), Some("1000"));
        confine_request_limits(&mut r, &flags(Some(50), Some("1M")), &compile).unwrap();
        assert_eq!(caps(&r), (20, 1000));
        // Above: refused, naming both.
        let e = confine_request_limits(
            &mut request(Some(51), None),
            &flags(Some(50), None),
            &compile,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("config.collectFiles (51)") && e.contains("--collect-files 50"),
            "{e}"
        );
        let e = confine_request_limits(
            &mut request(None, Some("2097152")),
            &flags(None, Some("1M")),
            &compile,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("config.collectSize (2097152)") && e.contains("--collect-size 1M"),
            "{e}"
        );
        // No flag: no ceiling but the bounds.
        let mut r = request(Some(100_000), Some("1073741824"));
        confine_request_limits(&mut r, &flags(None, None), &compile).unwrap();
        assert_eq!(caps(&r), (100_000, 1 << 30));
        let mut r = request(None, None);
        confine_request_limits(&mut r, &flags(None, None), &compile).unwrap();
        assert_eq!(caps(&r), (1000, 64 << 20));
    }

    #[test]
    fn a_missing_module_is_read_from_the_traceback() {
        let py = "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1\nModuleNotFoundError: No module named 'sklearn.linear_model'\n";
        assert_eq!(missing_module(py, "pip").as_deref(), Some("sklearn"));
        assert_eq!(missing_module(py, "npm"), None);
        let node = "node:internal/modules/cjs/loader:1228\n  throw err;\nError: Cannot find module 'lodash/fp'\nRequire stack:\n";
        assert_eq!(missing_module(node, "npm").as_deref(), Some("lodash"));
        let scoped = "Error: Cannot find module '@babel/core/lib/x'\n";
        assert_eq!(
            missing_module(scoped, "npm").as_deref(),
            Some("@babel/core")
        );
        for own in [
            "Error: Cannot find module './helper'\n",
            "Error: Cannot find module '/x/y'\n",
        ] {
            assert_eq!(missing_module(own, "npm"), None, "{own}");
        }
        assert_eq!(missing_module("ValueError: x\n", "pip"), None);
        // An import the program caught, then another error: not the missing module's.
        let caught =
            "ModuleNotFoundError: No module named 'ujson'\n\nDuring handling...\nValueError: bad\n";
        assert_eq!(missing_module(caught, "pip"), None);
        let not_pkg = "ModuleNotFoundError: No module named 'os.foo'; 'os' is not a package\n";
        assert_eq!(missing_module(not_pkg, "pip"), None);
        let node_caught =
            "Error: Cannot find module 'optional-dep'\n    at x\nTypeError: y is not a function\n";
        assert_eq!(missing_module(node_caught, "npm"), None);
        // An ES module's import (node 20's words), a package's subpath, a scoped package.
        let esm = "node:internal/modules/esm/resolve:873\n  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);\n        ^\n\nError [ERR_MODULE_NOT_FOUND]: Cannot find package 'lodash' imported from /workspace/main.mjs\n    at packageResolve (node:internal/modules/esm/resolve:873:9) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v20.20.2\n";
        assert_eq!(missing_module(esm, "npm").as_deref(), Some("lodash"));
        let esm_scoped = "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@scope/x' imported from /workspace/main.js\n";
        assert_eq!(
            missing_module(esm_scoped, "npm").as_deref(),
            Some("@scope/x")
        );
        // A file of the program's own that is missing is not a package.
        let esm_own = "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/workspace/util.mjs' imported from /workspace/main.mjs\n";
        assert_eq!(missing_module(esm_own, "npm"), None);
        let esm_caught = "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'a' imported from /w/m.mjs\nTypeError [ERR_X]: y\n";
        assert_eq!(missing_module(esm_caught, "npm"), None);
    }

    /// The hint for a missing module names the program's own module first (a file the caller
    /// forgot to send: installing a same-named package would run whoever holds that name on
    /// the registry), then the package, by the registry's name, in the caller's words (flags
    /// or a request's fields).
    #[test]
    fn a_missing_module_hint_names_the_programs_own_module_first() {
        let python = crate::profile::find("python", &[]).unwrap();
        let node = crate::profile::find("node", &[]).unwrap();
        let built = Rootfs::Dir("/var/lib/cordon/rootfs/python".into());
        let cli = RunRequest::code("python", "import mymodule_local");
        let py_err = |m: &str| {
            format!(
                "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1, in <module>\nModuleNotFoundError: No module named '{m}'\n"
            )
        };
        assert_eq!(
            missing_module_hint(&py_err("mymodule_local"), &python, &cli, &built).as_deref(),
            Some(
                "the program failed to import `mymodule_local`, which is neither among the program's files nor installed in its root filesystem: if it is the program's own module, send it with --file mymodule_local.py=PATH (a package: --file mymodule_local/__init__.py=PATH, and its other files likewise); if it is a package from PyPI, install it with --packages mymodule_local (the package's name may differ from the module's)"
            )
        );
        // PyPI's own name where it is another; on the host's Python, the built rootfs too.
        let m = missing_module_hint(
            &py_err("sklearn.linear_model"),
            &python,
            &cli,
            &Rootfs::Host,
        )
        .unwrap();
        let (own, pkg) = (
            m.find("--file sklearn.py=PATH").unwrap(),
            m.find("--packages scikit-learn (PyPI's name for `sklearn`)")
                .unwrap(),
        );
        assert!(own < pkg, "{m}");
        assert!(m.ends_with("which has numpy, pandas and matplotlib"), "{m}");
        // A request: its fields.
        let mut req = cli.clone();
        req.limits.naming = LimitNaming::Request;
        let m = missing_module_hint(&py_err("mymodule_local"), &python, &req, &built).unwrap();
        assert!(
            m.contains("send it in the request's `files` as \"mymodule_local.py\"")
                && m.contains("install it with \"packages\": [\"mymodule_local\"] in the request"),
            "{m}"
        );
        // Asked for already (by the module's or the package's name): nothing to add.
        let mut asked = cli.clone();
        asked.packages = vec!["scikit-learn".into()];
        assert_eq!(
            missing_module_hint(&py_err("sklearn"), &python, &asked, &built),
            None
        );
        // Node: require() and an ES module's import alike; the own module by its path.
        let node_req = RunRequest::code("node", "require('lodash')");
        for err in [
            "Error: Cannot find module 'lodash'\nRequire stack:\n- /workspace/main.js\n",
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'lodash' imported from /workspace/main.mjs\n",
        ] {
            assert_eq!(
                missing_module_hint(err, &node, &node_req, &Rootfs::Host).as_deref(),
                Some(
                    "the program failed to import `lodash`, which is neither among the program's files nor installed in its root filesystem: if it is the program's own module, send it with --file lodash.js=PATH and load it by its path (`require('./lodash')`, `import './lodash.js'`); if it is a package from npm, install it with --packages lodash (the package's name may differ from the module's)"
                ),
                "{err}"
            );
        }
        // A scoped name is a registry package: no file of the program's to send.
        let m = missing_module_hint(
            "Error: Cannot find module '@scope/pkg/sub'\nRequire stack:\n- /workspace/main.js\n",
            &node,
            &node_req,
            &Rootfs::Host,
        )
        .unwrap();
        assert!(
            m.contains("install it with --packages @scope/pkg") && !m.contains("--file"),
            "{m}"
        );
    }

    /// A failure that reads as a binary incompatibility, while the set shadows root
    /// filesystem packages, is pointed at the shadowing and the two ways out.
    #[test]
    fn a_binary_incompatibility_points_at_the_shadowing_set() {
        use crate::outcome::{DependencyReport, ShadowedDistribution};
        let shadow = |name: &str, dependents: &[&str]| ShadowedDistribution {
            name: name.into(),
            version: "2.4.6".into(),
            rootfs_version: "1.24.2+dfsg".into(),
            dependents: dependents.iter().map(|d| d.to_string()).collect(),
        };
        let mut deps = DependencyReport {
            installer: "pip".into(),
            packages: vec!["numpy".into()],
            cached: true,
            status: Status::Ok,
            output: String::new(),
            error: String::new(),
            execution_time: 0.0,
            memory_used: None,
            network: None,
            shadowed: vec![shadow("numpy", &["pandas"]), shadow("six", &[])],
        };
        let err = "  File \"pandas/_libs/interval.pyx\", line 1, in init pandas._libs.interval\nValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject\n";
        let cli = RunRequest::code("python", "import pandas");
        assert_eq!(
            shadow_hint(err, &deps, &cli).as_deref(),
            Some(
                "the program failed on a binary incompatibility (\"ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject\"): numpy 2.4.6 from --packages shadows the root filesystem's numpy 1.24.2+dfsg, which the root filesystem's pandas depends on; add the packages the program imports from the root filesystem to --packages too (pip then installs versions that fit), or pin numpy==1.24.2 in --packages to keep the root filesystem's version (`dependencies.shadowed` in the JSON result lists them all)"
            )
        );
        let mut req = cli.clone();
        req.limits.naming = LimitNaming::Request;
        let m = shadow_hint(err, &deps, &req).unwrap();
        assert!(
            m.contains("from `packages` shadows") && m.contains("in `packages` to keep"),
            "{m}"
        );
        // Another failure is not this one.
        assert_eq!(shadow_hint("KeyError: 'x'\n", &deps, &cli), None);
        // No shadowed package with dependents: the one the error names.
        deps.shadowed = vec![shadow("numpy", &[]), shadow("six", &[])];
        let m = shadow_hint(err, &deps, &cli).unwrap();
        assert!(m.contains("numpy 2.4.6 from") && !m.contains("six"), "{m}");
        deps.shadowed.clear();
        assert_eq!(shadow_hint(err, &deps, &cli), None);
    }

    #[test]
    fn an_entry_point_cannot_be_an_option() {
        for bad in ["-toolexec=/workspace/x.sh", "@args", "-m", "--", "-"] {
            let e = check_entry(bad).unwrap_err().to_string();
            assert!(e.contains("read as an option"), "{bad}: {e}");
        }
        for ok in ["main.go", "src/main.rs", "a-b.py", "x@y.js", "dir/-odd.py"] {
            check_entry(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        assert!(check_entry("../x").is_err());
    }

    #[test]
    fn missing_toolchains_name_the_fix() {
        let default = crate::spec::DEFAULT_PATH;
        let check = |program: &str, rootfs: &Rootfs, lang: &str| {
            check_toolchain(program, rootfs, lang, default, &[])
        };
        assert!(check("sh", &Rootfs::Host, "bash").is_ok());
        assert!(check("./main", &Rootfs::Host, "go").is_ok());
        let e = check("no-such-compiler-xyz", &Rootfs::Host, "xyz")
            .unwrap_err()
            .to_string();
        // A language without a rootfs recipe (a --profile's) is not told to build one.
        assert!(
            e.contains("apt-get install")
                && !e.contains("cordon rootfs build")
                && e.contains("or --rootfs DIR"),
            "{e}"
        );
        let d = tempfile::tempdir().unwrap();
        let e = check("sh", &Rootfs::Dir(d.path().into()), "bash")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not in the root filesystem") && e.contains("cordon rootfs build bash"),
            "{e}"
        );
        assert!(!e.contains("looked for on"), "{e}");
    }

    /// The toolchain is looked for where the sandbox will look: on the profile's PATH, in
    /// the root filesystem, and through the run's binds.
    #[test]
    fn toolchains_are_looked_for_on_the_profiles_path_and_binds() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let tool = root.path().join("opt/tool/bin");
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::write(tool.join("interp"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(tool.join("interp"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let rootfs = Rootfs::Dir(root.path().into());
        let default = crate::spec::DEFAULT_PATH;
        let e = check_toolchain("interp", &rootfs, "t", default, &[]).unwrap_err();
        assert!(e.to_string().contains("not in the root filesystem"), "{e}");
        let path = "/opt/tool/bin:/usr/bin";
        check_toolchain("interp", &rootfs, "t", path, &[]).unwrap();
        // Not on the profile's PATH: the message says which PATH was searched.
        let e = check_toolchain("other", &rootfs, "t", path, &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("(looked for on the profile's PATH=/opt/tool/bin:/usr/bin)"),
            "{e}"
        );
        // A relative directory is in the workspace, which only the run has: not refused.
        check_toolchain("other", &rootfs, "t", "bin:/usr/bin", &[]).unwrap();

        // A directory under a bind's destination is read from its source.
        let empty = tempfile::tempdir().unwrap();
        let rootfs = Rootfs::Dir(empty.path().into());
        let bind = |dst: &str| crate::spec::Bind {
            src: root.path().join("opt/tool"),
            dst: dst.into(),
            writable: false,
        };
        check_toolchain("interp", &rootfs, "t", "/tool/bin", &[bind("/tool")]).unwrap();
        assert!(check_toolchain("interp", &rootfs, "t", "/toolbox/bin", &[bind("/tool")]).is_err());
        assert!(check_toolchain("interp", &rootfs, "t", "/tool/bin", &[bind("/data")]).is_err());
        // On --rootfs host, a host directory the sandbox does not show (rustup's under
        // /root, /opt, /tmp) is not searched, whatever the PATH says.
        let hidden = tool.to_str().unwrap();
        let e = check_toolchain("interp", &Rootfs::Host, "t", hidden, &[]).unwrap_err();
        assert!(e.to_string().contains("the t toolchain is missing"), "{e}");
        assert_eq!(
            toolchain_identity("interp", &Rootfs::Host, hidden),
            "interp:not-found"
        );
        // /usr is shown: found there.
        check_toolchain("sh", &Rootfs::Host, "t", "/usr/bin", &[]).unwrap();
        // The compile cache's identity of the toolchain follows the same PATH.
        let id = toolchain_identity("interp", &Rootfs::Dir(root.path().into()), path);
        // Its path, size (10 bytes) and mtime.
        assert!(id.contains("/opt/tool/bin/interp:10:"), "{id}");
        assert_eq!(
            toolchain_identity("interp", &Rootfs::Dir(root.path().into()), default),
            "interp:not-found"
        );
    }

    #[test]
    fn the_compile_key_covers_names_modes_bytes_and_the_compiler() {
        let p = crate::profile::find("go", &[]).unwrap();
        let argv = p.expand(p.compile.as_ref().unwrap(), "main.go");
        let file = |path: &str, mode: u32, contents: &[u8]| InputFile {
            path: path.into(),
            contents: contents.to_vec(),
            mode,
        };
        let base = vec![
            file("main.go", 0o644, b"package main"),
            file("b.sh", 0o644, b"x"),
        ];
        let key = |files: &[InputFile]| compile_key(&p, &argv, &Rootfs::Host, files);
        let k = key(&base);
        // The order files are given in does not matter.
        let mut swapped = base.clone();
        swapped.reverse();
        assert_eq!(key(&swapped), k);
        let mut m = base.clone();
        m[1].mode = 0o755;
        assert_ne!(key(&m), k, "a file's mode must change the key");
        let mut c = base.clone();
        c[1].contents = b"y".to_vec();
        assert_ne!(key(&c), k);
        let mut n = base.clone();
        n[1].path = "c.sh".into();
        assert_ne!(key(&n), k);
        let d = tempfile::tempdir().unwrap();
        assert_ne!(
            compile_key(&p, &argv, &Rootfs::Dir(d.path().into()), &base),
            k
        );
    }

    #[test]
    fn the_input_cap_is_named_as_the_caller_gave_the_input() {
        let big = vec![InputFile {
            path: "a".into(),
            contents: vec![0; MAX_INPUT_BYTES as usize + 1],
            mode: 0o644,
        }];
        let e = check_input_size(&big, &StdinSource::Null, LimitNaming::Request)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("the request's code, files and stdin exceed 64 MiB"),
            "{e}"
        );
        assert!(!e.contains("--file"), "{e}");
        let e = check_input_size(&big, &StdinSource::Null, LimitNaming::Flags)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--file"), "{e}");
        check_input_size(&big[..0], &StdinSource::Null, LimitNaming::Request).unwrap();
        // A request's stdin counts too.
        let stdin = StdinSource::Bytes(vec![0; MAX_INPUT_BYTES as usize]);
        let e = check_input_size(&big[..0], &stdin, LimitNaming::Request);
        assert!(e.is_ok(), "{e:?}");
        let e = check_input_size(
            &big[..1]
                .iter()
                .map(|f| InputFile {
                    contents: vec![1],
                    ..f.clone()
                })
                .collect::<Vec<_>>(),
            &stdin,
            LimitNaming::Request,
        );
        assert!(e.is_err(), "one byte of files over the cap with stdin");
    }

    /// A root filesystem that cannot be read is refused before any launch, saying where
    /// it came from: --rootfs, the profile's `rootfs`, or the built rootfs `auto` found.
    #[test]
    fn an_unreadable_rootfs_is_named_by_where_it_came_from() {
        let p = crate::profile::find("python", &[]).unwrap();
        let missing = Rootfs::Dir("/nonexistent/cordon-rootfs".into());
        let e = check_rootfs(&p, Some(&missing), &missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/cordon-rootfs") && e.contains("--rootfs; check it"),
            "{e}"
        );
        let mut q = p.clone();
        q.rootfs = "/nonexistent/cordon-rootfs".into();
        let e = check_rootfs(&q, None, &missing).unwrap_err().to_string();
        assert!(e.contains("the python profile's `rootfs`"), "{e}");
        assert!(!e.contains("the path given to --rootfs"), "{e}");
        q.rootfs = "auto".into();
        let e = check_rootfs(&q, None, &missing).unwrap_err().to_string();
        assert!(
            e.contains("`auto` found") || e.contains("\"auto\"` found"),
            "{e}"
        );
        assert!(e.contains("cordon rootfs build python"), "{e}");
        check_rootfs(&q, None, &Rootfs::Host).unwrap();
        check_rootfs(&q, None, &Rootfs::Dir("/".into())).unwrap();
    }

    #[test]
    fn rootfs_override_wins() {
        let p = crate::profile::find("python", &[]).unwrap();
        assert_eq!(resolve_rootfs(&p, Some(&Rootfs::Host)), Rootfs::Host);
        let mut q = p.clone();
        q.rootfs = "/some/dir".into();
        assert_eq!(resolve_rootfs(&q, None), Rootfs::Dir("/some/dir".into()));
    }
}

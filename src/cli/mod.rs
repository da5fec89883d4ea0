//! clap definitions only: the command line, and its translation into a [`SandboxSpec`].

use crate::spec::{self, BackendChoice, Degrade, Rootfs, SandboxSpec, StdinSource};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod fast;
pub mod oci;

// `exec`'s defaults, shared by clap's definition and the fast path (fast.rs).
const EXEC_TIMEOUT: &str = "30s";
const EXEC_PIDS: u64 = 64;
const EXEC_OUTPUT_LIMIT: &str = "10M";
const EXEC_FILE_SIZE: &str = "256M";
const EXEC_OPEN_FILES: u64 = 1024;
const EXEC_WORKSPACE_SIZE: &str = "256M";
const EXEC_WORKSPACE_INODES: u64 = spec::DEFAULT_WORKSPACE_INODES;
const EXEC_TMP_SIZE: &str = "64M";
const EXEC_COLLECT_FILES: usize = spec::DEFAULT_COLLECT_FILES;
const EXEC_COLLECT_SIZE: &str = "64M";
const EXEC_ROOTFS: &str = "host";
const LIMITS_BACKEND: &str = "auto";

const ABOUT: &str = "Run untrusted code in a Linux sandbox: no daemon, no setuid bit.";
const EXEC_ABOUT: &str =
    "Run a command in a fresh sandbox and return when every process of it is gone.";
const RUN_ABOUT: &str = "Run code in a language (python, node, go, rust, bash, or a --profile): \
    compile it in a sandbox when the language needs it, run it in another, report what it printed and wrote.";

#[derive(Debug, Parser)]
#[command(name = "cordon", version, about = ABOUT)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments. `exec` and `run` each take a short path that defines
    /// only that command: clap builds the arguments of every subcommand before it parses,
    /// which cost each sandbox's start about 0.2 ms for commands it does not run. `exec`'s
    /// ordinary command lines skip clap altogether (fast.rs). Same arguments, help and
    /// errors either way (tests compare them).
    pub fn parse_args() -> Result<Cli, clap::Error> {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        match args.get(1).and_then(|a| a.to_str()) {
            Some("exec") => {
                let rest = args.get(2..).unwrap_or_default();
                let cli = match fast::exec(rest) {
                    Some(a) => Ok(Cli {
                        command: Command::Exec(Box::new(a)),
                    }),
                    None => OneCli::<ExecCommand>::try_parse_from(&args)
                        .map(OneCli::into_cli)
                        .map_err(with_exec_option_tip),
                }?;
                if let Command::Exec(a) = &cli.command {
                    let late = fast::options_after_command(rest, &a.command);
                    if !late.is_empty() {
                        let (verb, pron) = if late.len() == 1 {
                            ("comes", "it is")
                        } else {
                            ("come", "they are")
                        };
                        eprintln!(
                            "cordon: warning: {} {verb} after the command {:?}: {pron} passed to the command, not read by cordon; put cordon's options before the command, or `--` before the command to say this is meant",
                            late.join(" "),
                            a.command[0],
                        );
                    }
                }
                Ok(cli)
            }
            Some("run") => OneCli::<RunCommand>::try_parse_from(&args)
                .map(OneCli::into_cli)
                .map_err(|e| with_run_args_tip(e, &args)),
            _ => Cli::try_parse_from(args),
        }
    }
}

/// `cordon exec --bogus true`: clap's tip ("to pass '--bogus' as a value, use '-- --bogus'")
/// would run a command named `--bogus`. An unknown option that clap has no suggestion for is
/// said to be no option of exec's instead; a misspelt one keeps clap's suggestion.
fn with_exec_option_tip(e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument || e.get(ContextKind::SuggestedArg).is_some() {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    clap::Error::raw(
        ErrorKind::UnknownArgument,
        format!(
            "unexpected argument '{arg}' found\n\n  tip: cordon exec has no option {arg} (`cordon exec --help` lists them); a command whose name starts with `-` goes after `--`\n\nUsage: cordon exec [OPTIONS] <CMD>...\n\nFor more information, try '--help'.\n"
        ),
    )
}

/// `cordon run FILE x y`: clap says only "unexpected argument 'x' found". The program's
/// arguments go after `--` (cordon's options may follow FILE, so they cannot start at it):
/// an unexpected argument, with no `--` on the line, gets that tip.
fn with_run_args_tip(e: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    const USAGE: &str = "Usage: cordon run [OPTIONS] [FILE] [-- <ARGS>...]\n\nFor more information, try '--help'.\n";
    let run_args = args.get(2..).unwrap_or_default();
    if runs_requests(run_args) {
        return with_request_tip(e);
    }
    if args.iter().any(|a| a == "--") {
        return e;
    }
    // `cordon run python -c CODE`, `cordon run python app.py`: the language taken for FILE.
    let lang_tip = if run_args
        .iter()
        .any(|a| a == "--lang" || a == "-l" || a.to_string_lossy().starts_with("--lang="))
    {
        String::new()
    } else {
        first_positional(run_args)
            .filter(|a| crate::profile::is_builtin_name(a))
            .map(|lang| format!("\n  tip: `{lang}` was taken for FILE; a language goes with --lang: cordon run --lang {lang} ... (a FILE's extension names it too: cordon run app.py)"))
            .unwrap_or_default()
    };
    let with_c = run_args
        .iter()
        .any(|a| a == "-c" || a.to_string_lossy().starts_with("-c"));
    let args_tip = "\n  tip: with -c, the program's arguments go after `--`: cordon run [OPTIONS] -c CODE -- ARGS...".to_string();
    match e.kind() {
        // A misspelt option of cordon's keeps clap's suggestion instead.
        ErrorKind::UnknownArgument if e.get(ContextKind::SuggestedArg).is_none() => {
            let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
                return e;
            };
            let tip = match (lang_tip.is_empty(), with_c) {
                (false, _) => lang_tip,
                (true, true) => args_tip,
                (true, false) => format!(
                    "\n  tip: the program's arguments go after `--`: cordon run [OPTIONS] [FILE] -- {arg} ..."
                ),
            };
            clap::Error::raw(
                ErrorKind::UnknownArgument,
                format!("unexpected argument '{arg}' found\n{tip}\n\n{USAGE}"),
            )
        }
        // `-c CODE x`: x was taken for FILE.
        ErrorKind::ArgumentConflict => {
            let text = e.to_string();
            if !(text.contains("'-c <CODE>'") && text.contains("'[FILE]'")) {
                return e;
            }
            clap::Error::raw(
                ErrorKind::ArgumentConflict,
                format!(
                    "the argument '-c <CODE>' cannot be used with '[FILE]'\n{}\n\n{USAGE}",
                    if lang_tip.is_empty() {
                        args_tip
                    } else {
                        lang_tip
                    }
                ),
            )
        }
        _ => e,
    }
}

/// The first argument of `run`'s command line that clap takes for FILE: not an option, nor the
/// value of one (read from run's own definition of which options take values).
fn first_positional(run_args: &[std::ffi::OsString]) -> Option<&str> {
    let cmd = <OneCli<RunCommand> as clap::CommandFactory>::command();
    let run = cmd.find_subcommand("run")?;
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut args = run_args.iter().filter_map(|a| a.to_str());
    while let Some(a) = args.next() {
        let option = if let Some(long) = a.strip_prefix("--") {
            if long.is_empty() {
                return None;
            }
            (!long.contains('=')).then(|| run.get_arguments().find(|o| o.get_long() == Some(long)))
        } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            // `-cCODE` carries its value; `-c CODE` takes the next argument.
            let mut chars = short.chars();
            let c = chars.next();
            (chars.next().is_none()).then(|| run.get_arguments().find(|o| o.get_short() == c))
        } else {
            return Some(a);
        };
        if option.flatten().is_some_and(takes_value) {
            args.next();
        }
    }
    None
}

/// `cordon run --request - --lang node` or `--request - --bogus`: clap's message, and where
/// the request's parts go instead of flags (a misspelt flag keeps clap's suggestion).
fn with_request_tip(e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ErrorKind};
    const USAGE: &str = "Usage: cordon run [OPTIONS] --request FILE|-\n       cordon run [OPTIONS] --requests FILE.jsonl [--jobs N] [--unordered]\n\nFor more information, try '--help'.\n";
    let kind = e.kind();
    let first = match kind {
        ErrorKind::UnknownArgument if e.get(ContextKind::SuggestedArg).is_none() => e
            .get(ContextKind::InvalidArg)
            .map(|arg| format!("unexpected argument '{arg}' found")),
        ErrorKind::ArgumentConflict => {
            let text = e.to_string();
            text.lines()
                .next()
                .map(|l| l.trim_start_matches("error: ").to_string())
        }
        _ => None,
    };
    match first {
        Some(first) => clap::Error::raw(
            kind,
            format!("{first}\n\n  tip: {}\n\n{USAGE}", request_flags_tip()),
        ),
        None => e,
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(about = EXEC_ABOUT)]
    Exec(Box<ExecArgs>),
    #[command(about = RUN_ABOUT)]
    Run(Box<RunArgs>),
    /// List the languages: version, and which root filesystem each would use.
    Profiles {
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
        /// Extra profile files.
        #[arg(long = "profile", value_name = "FILE")]
        profiles: Vec<PathBuf>,
    },
    /// Show the most recent runs of `cordon run`.
    History {
        /// How many records.
        #[arg(long, default_value_t = 20)]
        last: usize,
        /// Print them as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Build and list per-language root filesystems.
    #[command(subcommand)]
    Rootfs(RootfsCommand),
    /// cordon as an OCI runtime (the same as the `cordon-oci` binary; runc's commands).
    Oci(Box<oci::OciCli>),
    /// Check which isolation mechanisms this host offers, and how to fix missing ones.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// How cordon answers on stdout when a command line asks for JSON: not at all (text), with
/// one JSON object (`--json`, `cordon run --request`), or with JSON lines, each one line
/// (`cordon run --requests`, and a batch's worker), which a reader takes line by line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonAnswer {
    No,
    Object,
    Line,
}

impl JsonAnswer {
    /// `--json` given or not.
    pub fn from_json_flag(json: bool) -> JsonAnswer {
        Self::of(json, false)
    }

    /// One run's answer: JSON (`json`: `--json`, `--request`) as one object, or as the last
    /// of its lines with `--stream` (`stream`), else text.
    pub fn of(json: bool, stream: bool) -> JsonAnswer {
        match (json, stream) {
            (true, true) => JsonAnswer::Line,
            (true, false) => JsonAnswer::Object,
            (false, _) => JsonAnswer::No,
        }
    }
}

/// Whether `a` is `--NAME` or `--NAME=VALUE`.
fn is_option(a: &std::ffi::OsStr, name: &str) -> bool {
    let a = a.as_encoded_bytes();
    a.strip_prefix(b"--")
        .and_then(|a| a.strip_prefix(name.as_bytes()))
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'=')
}

/// Whether a `cordon run` command line (the arguments after `run`) runs JSON requests: has
/// `--request` or `--requests` before any `--`.
fn runs_requests(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| is_option(a, "request") || is_option(a, "requests"))
}

/// How a command line (the program's name first) asks to be answered (see [`JsonAnswer`]):
/// `exec`'s or `run`'s `--json` among cordon's own options, before any `--`, and run's
/// `--request`/`--requests`. What a usage error is then also printed as.
pub fn json_answer<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> JsonAnswer {
    use clap::CommandFactory;
    let mut args = args.into_iter().skip(1);
    let Some(sub) = args.next() else {
        return JsonAnswer::No;
    };
    if sub == "run" {
        // run's options may follow its FILE; the program's arguments come after `--` only.
        let own: Vec<std::ffi::OsString> = args.take_while(|a| a != "--").collect();
        let has = |name: &str| own.iter().any(|a| is_option(a, name));
        let json = has("request") || own.iter().any(|a| a == "--json");
        return if has("requests") || has("request-line") {
            JsonAnswer::Line
        } else {
            JsonAnswer::of(json, has("stream"))
        };
    }
    if sub != "exec" {
        return JsonAnswer::No;
    }
    // exec's command starts at its first argument that is neither an option nor an
    // option's value (its own `--json` is the command's).
    let cmd = OneCli::<ExecCommand>::command();
    let Some(exec) = cmd.find_subcommand("exec") else {
        return JsonAnswer::No;
    };
    let takes_value = |a: &str| {
        exec.get_arguments().any(|arg| {
            arg.get_action().takes_values()
                && (a
                    .strip_prefix("--")
                    .is_some_and(|l| arg.get_long() == Some(l))
                    || a.strip_prefix('-')
                        .and_then(|s| s.chars().next())
                        .is_some_and(|c| a.len() == 2 && arg.get_short() == Some(c)))
        })
    };
    let (mut skip_value, mut json, mut stream) = (false, false, false);
    for a in args {
        let a = a.to_string_lossy();
        if skip_value {
            skip_value = false;
            continue;
        }
        if a == "--" || !a.starts_with('-') {
            break;
        }
        json |= a == "--json";
        stream |= a == "--stream";
        skip_value = !a.contains('=') && takes_value(&a);
    }
    JsonAnswer::of(json, stream)
}

/// What a request's author is told when a flag of `cordon run` was refused next to
/// `--request`/`--requests`: where each part of the run is given instead.
pub fn request_flags_tip() -> String {
    format!(
        "with --request or --requests, the code and what it runs with are the JSON request's fields, not flags ({}); the flags that apply are the operator's, for every request: {}",
        crate::request::REQUEST_FIELDS.join(", "),
        REQUEST_MODE_FLAGS.join(", ")
    )
}

/// The flags `cordon run` takes next to `--request`/`--requests` (the limit flags are each a
/// default and a ceiling of a request's limits).
pub const REQUEST_MODE_FLAGS: &[&str] = &[
    "the limit flags (--timeout, --cpu-time, --memory, --cpus, --pids, --output-limit, --file-size, --open-files, --workspace-size, --workspace-inodes, --tmp-size, --collect-files, --collect-size, --compile-timeout, --compile-memory, --compile-pids: each a default and a ceiling)",
    "--profile",
    "--rootfs",
    "--allow-degraded",
    "--limits-backend",
    "--no-cache",
    "--no-history",
    "--output-root",
    "--request-net",
    "--output-encoding",
    "--jobs and --unordered (with --requests)",
    "--stream",
];

/// One launching subcommand alone, `exec` or `run` (see [`Cli::parse_args`]).
#[derive(Debug, Parser)]
#[command(name = "cordon", version, about = ABOUT)]
struct OneCli<C: Subcommand + Into<Command>> {
    #[command(subcommand)]
    command: C,
}

impl<C: Subcommand + Into<Command>> OneCli<C> {
    fn into_cli(self) -> Cli {
        Cli {
            command: self.command.into(),
        }
    }
}

#[derive(Debug, Subcommand)]
enum ExecCommand {
    #[command(about = EXEC_ABOUT)]
    Exec(Box<ExecArgs>),
}

impl From<ExecCommand> for Command {
    fn from(c: ExecCommand) -> Command {
        let ExecCommand::Exec(a) = c;
        Command::Exec(a)
    }
}

#[derive(Debug, Subcommand)]
enum RunCommand {
    #[command(about = RUN_ABOUT)]
    Run(Box<RunArgs>),
}

impl From<RunCommand> for Command {
    fn from(c: RunCommand) -> Command {
        let RunCommand::Run(a) = c;
        Command::Run(a)
    }
}

#[derive(Debug, Subcommand)]
pub enum RootfsCommand {
    /// Build the root filesystem of a language with mmdebstrap.
    Build {
        /// The language (python, node, go, rust, bash).
        lang: String,
    },
    /// List the built root filesystems.
    List {
        /// Print the list as JSON (language, path, toolchain, built, size).
        #[arg(long)]
        json: bool,
    },
}

/// Limits for `cordon run`: unset ones keep the profile's value (then cordon's default).
/// `--net`, `--net-resolve`, `--net-log` (exec and run).
#[derive(Debug, Args, Default, Clone)]
pub struct NetArgs {
    /// Network: `none` (default: only loopback, with no TCP), `allow=HOST[:PORT][,...]` (only these hosts,
    /// through cordon's filtering HTTP/HTTPS proxy; `*.example.org` wildcards; ports default
    /// to 80 and 443), or `host` (the host's network, unfiltered).
    #[arg(long = "net", value_name = "none|allow=HOSTS|host", value_parser = crate::net::parse_network)]
    pub net: Option<crate::net::Network>,
    /// With --net allow=: the proxy answers NAME with IP instead of looking it up (like curl
    /// --resolve; it grants nothing by itself). Repeatable.
    #[arg(long = "net-resolve", value_name = "NAME=IP", value_parser = crate::net::parse_override)]
    pub resolve: Vec<(String, std::net::IpAddr)>,
    /// With --net allow=: log every admitted and refused connection on stderr.
    #[arg(long)]
    pub net_log: bool,
}

impl NetArgs {
    /// The network these flags ask for (`None`: no --net given).
    pub fn network(&self) -> Result<Option<crate::net::Network>, crate::net::PolicyError> {
        use crate::net::Network;
        match &self.net {
            Some(Network::Allow(a)) => {
                let mut a = a.clone();
                a.overrides = self.resolve.clone();
                a.log = self.net_log;
                Ok(Some(Network::Allow(a)))
            }
            other => {
                if !self.resolve.is_empty() || self.net_log {
                    return Err(crate::net::PolicyError {
                        flag: "--net-resolve/--net-log",
                        value: match other {
                            Some(Network::Host) => "--net host",
                            _ => "--net none",
                        }
                        .into(),
                        reason: "only mean something with --net allow=...".into(),
                    });
                }
                Ok(other.clone())
            }
        }
    }
}

#[derive(Debug, Args, Default, Clone)]
pub struct RunLimitArgs {
    /// Wall-clock limit of the run (default: the profile's, else 30s).
    #[arg(long, allow_negative_numbers = true, value_name = "DUR")]
    pub timeout: Option<String>,
    /// CPU-time limit (default: none; 0 = none): with a cgroup, summed over the whole
    /// sandbox (and per process); without one, per process only (RLIMIT_CPU, whole seconds).
    #[arg(long, allow_negative_numbers = true, value_name = "DUR")]
    pub cpu_time: Option<String>,
    /// Memory limit of the run (default 512M).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub memory: Option<String>,
    /// CPUs for the run (default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_cpus)]
    pub cpus: Option<f64>,
    /// Processes and threads (default 64).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count)]
    pub pids: Option<u64>,
    /// Bytes kept of stdout and of stderr, each (default 10M).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub output_limit: Option<String>,
    /// Largest file the program may write (default 256M; 0 = none).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub file_size: Option<String>,
    /// Open files per process (default 1024).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count)]
    pub open_files: Option<u64>,
    /// Size of /workspace (default 256M).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub workspace_size: Option<String>,
    /// Files, directories and symlinks /workspace may hold (default 16384).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count)]
    pub workspace_inodes: Option<u64>,
    /// Size of /tmp and of /dev/shm, each (default 64M).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub tmp_size: Option<String>,
    /// The most files collected from /workspace, listed or copied to --output-dir (default
    /// 1000; 1 to 100000); the rest are in filesOmitted.
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = collect_files_arg)]
    pub collect_files: Option<u64>,
    /// The most bytes of file contents copied to --output-dir, in all (default 64M; at most
    /// 1G: cordon holds them in memory); the rest are in filesOmitted.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", value_parser = collect_size_arg)]
    pub collect_size: Option<String>,
    /// Wall-clock limit of the compile (default: the profile's).
    #[arg(long, allow_negative_numbers = true, value_name = "DUR")]
    pub compile_timeout: Option<String>,
    /// Memory limit of the compile.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub compile_memory: Option<String>,
    /// Processes of the compile.
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count)]
    pub compile_pids: Option<u64>,
}

impl RunLimitArgs {
    pub fn run_overrides(&self) -> crate::profile::LimitOverrides {
        crate::profile::LimitOverrides {
            timeout: self.timeout.clone(),
            cpu_time: self.cpu_time.clone(),
            memory: self.memory.clone(),
            cpus: self.cpus,
            pids: self.pids,
            output_limit: self.output_limit.clone(),
            file_size: self.file_size.clone(),
            open_files: self.open_files,
            workspace_size: self.workspace_size.clone(),
            workspace_inodes: self.workspace_inodes,
            tmp_size: self.tmp_size.clone(),
            collect_files: self.collect_files,
            collect_size: self.collect_size.clone(),
            naming: crate::spec::LimitNaming::Flags,
        }
    }
    /// These flags as they were given, for a `cordon run` started with the same limits: each
    /// as one `--flag=value` word, so that a value starting with `-` stays a value.
    pub fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut put = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push(format!("--{flag}={v}"));
            }
        };
        put("timeout", self.timeout.clone());
        put("cpu-time", self.cpu_time.clone());
        put("memory", self.memory.clone());
        put("cpus", self.cpus.map(|c| c.to_string()));
        put("pids", self.pids.map(|p| p.to_string()));
        put("output-limit", self.output_limit.clone());
        put("file-size", self.file_size.clone());
        put("open-files", self.open_files.map(|n| n.to_string()));
        put("workspace-size", self.workspace_size.clone());
        put(
            "workspace-inodes",
            self.workspace_inodes.map(|n| n.to_string()),
        );
        put("tmp-size", self.tmp_size.clone());
        put("collect-files", self.collect_files.map(|n| n.to_string()));
        put("collect-size", self.collect_size.clone());
        put("compile-timeout", self.compile_timeout.clone());
        put("compile-memory", self.compile_memory.clone());
        put("compile-pids", self.compile_pids.map(|n| n.to_string()));
        out
    }

    pub fn compile_overrides(&self) -> crate::profile::LimitOverrides {
        crate::profile::LimitOverrides {
            timeout: self.compile_timeout.clone(),
            memory: self.compile_memory.clone(),
            pids: self.compile_pids,
            naming: crate::spec::LimitNaming::CompileFlags,
            ..Default::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The language (see `cordon profiles`); without it, the one whose source files have
    /// FILE's extension (`.py`: python), else the one profile given with --profile.
    #[arg(long, short = 'l', value_name = "LANG")]
    pub lang: Option<String>,
    /// The code, as a string.
    #[arg(short = 'c', value_name = "CODE", conflicts_with = "file")]
    pub code: Option<String>,
    /// The source file to run, or `-` to read the code from stdin.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// One JSON request (a file, or `-` for stdin); prints one JSON result.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["lang", "code", "file", "requests"])]
    pub request: Option<PathBuf>,
    /// JSON requests, one per line; prints one JSON result per line, in order.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["lang", "code", "file"])]
    pub requests: Option<PathBuf>,
    /// Batch mode: how many requests run at once (default 1).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Batch mode: print each result as soon as its request ends, not in input order; each
    /// result then starts with `line`, its request's line in the file.
    #[arg(long)]
    pub unordered: bool,
    /// With --json, --request or --requests --unordered: also print the program's stdout
    /// and stderr as they arrive, one JSON line per piece (`{"stdout": "..."}`,
    /// `{"stderr": "..."}`; a compile's or a package install's inside `{"compile": ...}` or
    /// `{"dependencies": ...}`, as text), before its result, which is then one line too.
    #[arg(long)]
    pub stream: bool,
    /// A batch worker's request: its line in the --requests file, for its error messages.
    #[arg(long, allow_negative_numbers = true, value_name = "N", hide = true)]
    pub request_line: Option<usize>,
    /// Print the result object as JSON.
    #[arg(long)]
    pub json: bool,
    /// With --json, --request or --requests: how the result holds the program's stdout and
    /// stderr (`output`, `error`): `utf8` text (default; bytes that are not UTF-8 become
    /// U+FFFD) or `base64` of the exact bytes. A request's `outputEncoding` overrides it.
    #[arg(long, value_name = "ENCODING")]
    pub output_encoding: Option<crate::outcome::OutputEncoding>,
    #[command(flatten)]
    pub limits: RunLimitArgs,
    #[command(flatten)]
    pub net: NetArgs,
    /// Packages to install before the code runs (python: pip, node: npm), comma-separated;
    /// installed sets are cached, and the code itself runs without the registry's network.
    #[arg(long, value_name = "PKG[,PKG...]", value_delimiter = ',')]
    pub packages: Vec<String>,
    /// The package index for --packages (pip's --index-url, npm's --registry); default: the
    /// profile's `[packages] index`.
    #[arg(long, value_name = "URL")]
    pub package_index: Option<String>,
    /// A lock file to install exactly (python: a requirements file, hashes honoured; node: a
    /// package-lock.json, installed with `npm ci`); its contents are part of the cache key.
    #[arg(long, value_name = "FILE")]
    pub packages_lock: Option<PathBuf>,
    /// Add KEY=VALUE to the program's environment (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = spec::parse_env_pair)]
    pub env: Vec<(String, String)>,
    /// Copy a host file into /workspace as NAME (repeatable; at most 64 MiB in all: bind
    /// larger data with --ro-bind).
    #[arg(long = "file", value_name = "NAME=PATH")]
    pub files: Vec<String>,
    /// Show a host directory read-only at DST, one new top-level directory (`/data`), to the
    /// program (not to its compiler), as with `cordon exec` (repeatable; not for requests,
    /// which cannot name host paths).
    #[arg(long = "ro-bind", value_name = "SRC:DST", conflicts_with_all = ["request", "requests"])]
    pub ro_binds: Vec<String>,
    /// Copy what the program wrote in /workspace here after the run.
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Confine a JSON request's outputDir to this directory: a relative outputDir is taken
    /// under it, an absolute one must be inside it (give it when requests come from code you
    /// do not trust: cordon writes the program's files where outputDir says, as you).
    #[arg(long, value_name = "DIR")]
    pub output_root: Option<PathBuf>,
    /// What network a JSON request may ask for (`config.network`, `packages`,
    /// `packageIndex`): `any`, `public` (no loopback, private, link-local or metadata address,
    /// none of this host's, no `host` network) or `none` (no network, no package install).
    /// Give `public` or `none` when requests come from code you do not trust. Default `any`.
    #[arg(long, value_name = "SCOPE")]
    pub request_net: Option<crate::run::RequestNet>,
    /// Feed this file to the program's stdin.
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// `host`, a root filesystem directory, or the profile's choice (default).
    #[arg(long, value_name = "host|DIR")]
    pub rootfs: Option<String>,
    /// An extra profile file (repeatable).
    #[arg(long = "profile", value_name = "FILE")]
    pub profiles: Vec<PathBuf>,
    /// Accept running without a layer the host lacks (reported in the result).
    #[arg(long, value_name = "LAYER", value_delimiter = ',')]
    pub allow_degraded: Vec<DegradeArg>,
    /// Which limits backend to use; forcing one the host lacks is an error.
    #[arg(long, value_name = "BACKEND", default_value = LIMITS_BACKEND)]
    pub limits_backend: BackendArg,
    /// Always compile, never use the compile cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Do not record the run in the history.
    #[arg(long)]
    pub no_history: bool,
    /// Arguments for the program.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

impl BackendArg {
    pub fn choice(self) -> BackendChoice {
        match self {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::CgroupV2 => BackendChoice::CgroupV2,
            BackendArg::CgroupV1 => BackendChoice::CgroupV1,
            BackendArg::Rlimit => BackendChoice::Rlimit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Auto,
    CgroupV2,
    CgroupV1,
    Rlimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DegradeArg {
    /// Run even when Landlock is not available (reported in the result).
    Landlock,
    /// Bind host directories when the kernel cannot overlay them (file locks on them are then
    /// shared with other sandboxes and the host; reported in the result).
    Overlay,
    /// Under `--net host` without a cgroup, leave the sandbox's socket buffers out of
    /// `--memory` (the memory watch cannot tell them from the host's; reported in the result).
    SocketMemory,
    /// Run even where a crash would start the host's piped `kernel.core_pattern` helper
    /// (the caller's hard core limit is 0, so RLIMIT_CORE cannot be 1; reported in the result).
    CoreDumps,
}

impl DegradeArg {
    /// The layers a list of `--allow-degraded` values accepts to lose.
    pub fn degrade(args: &[DegradeArg]) -> Degrade {
        Degrade {
            landlock: args.contains(&DegradeArg::Landlock),
            overlay: args.contains(&DegradeArg::Overlay),
            socket_memory: args.contains(&DegradeArg::SocketMemory),
            core_dumps: args.contains(&DegradeArg::CoreDumps),
        }
    }

    /// The value as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DegradeArg::Landlock => "landlock",
            DegradeArg::Overlay => "overlay",
            DegradeArg::SocketMemory => "socket-memory",
            DegradeArg::CoreDumps => "core-dumps",
        }
    }
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Print the result object as JSON on stdout (the program's output is inside it).
    #[arg(long)]
    pub json: bool,
    /// With --json: how the result holds the program's stdout and stderr (`output`,
    /// `error`): `utf8` text (default; bytes that are not UTF-8 become U+FFFD) or `base64` of
    /// the exact bytes.
    #[arg(long, value_name = "ENCODING")]
    pub output_encoding: Option<crate::outcome::OutputEncoding>,
    /// With --json: also print the program's stdout and stderr as they arrive, one JSON line
    /// per piece (`{"stdout": "..."}`, `{"stderr": "..."}`, in the output encoding), before
    /// the result, which is then one line too.
    #[arg(long)]
    pub stream: bool,
    /// Wall-clock limit (30, 1.5s, 500ms, 2m, 1m30s).
    #[arg(long, allow_negative_numbers = true, value_name = "DUR", default_value = EXEC_TIMEOUT, value_parser = spec::parse_duration)]
    pub timeout: std::time::Duration,
    /// CPU-time limit (default: none; 0 = none): with a cgroup, summed over the whole
    /// sandbox (and per process); without one, per process only (RLIMIT_CPU, whole seconds).
    #[arg(long, allow_negative_numbers = true, value_name = "DUR", value_parser = spec::parse_duration)]
    pub cpu_time: Option<std::time::Duration>,
    /// Memory limit, no swap (default 512M; 0 = none).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", value_parser = spec::parse_memory)]
    pub memory: Option<u64>,
    /// CPU bandwidth in CPUs (default 1; 0 = none).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_cpus)]
    pub cpus: Option<f64>,
    /// Processes and threads alive at once (0 = none).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count, default_value_t = EXEC_PIDS)]
    pub pids: u64,
    /// Bytes kept of stdout and of stderr, each; exceeding it kills the sandbox.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", default_value = EXEC_OUTPUT_LIMIT, value_parser = spec::parse_size)]
    pub output_limit: u64,
    /// Largest file the program may write (0 = none).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", default_value = EXEC_FILE_SIZE, value_parser = spec::parse_size)]
    pub file_size: u64,
    /// Open file descriptors per process.
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count, default_value_t = EXEC_OPEN_FILES)]
    pub open_files: u64,
    /// Size of the /workspace tmpfs.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", default_value = EXEC_WORKSPACE_SIZE, value_parser = spec::parse_size)]
    pub workspace_size: u64,
    /// Files, directories and symlinks the /workspace tmpfs may hold.
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_count, default_value_t = EXEC_WORKSPACE_INODES)]
    pub workspace_inodes: u64,
    /// Size of the /tmp and /dev/shm tmpfs.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", default_value = EXEC_TMP_SIZE, value_parser = spec::parse_size)]
    pub tmp_size: u64,
    /// With --output-dir: the most files collected (1 to 100000); the rest are in
    /// filesOmitted.
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = EXEC_COLLECT_FILES, value_parser = spec::parse_collect_files, requires = "output_dir")]
    pub collect_files: usize,
    /// With --output-dir: the most bytes of file contents collected, in all (at most 1G:
    /// cordon holds them in memory); the rest are in filesOmitted.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE", default_value = EXEC_COLLECT_SIZE, value_parser = spec::parse_collect_size, requires = "output_dir")]
    pub collect_size: u64,
    /// Add KEY=VALUE to the program's environment (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = spec::parse_env_pair)]
    pub env: Vec<(String, String)>,
    /// Feed this file to the program's stdin (default: cordon's own stdin, through a pipe).
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// Copy a host file into /workspace as NAME before the program starts (repeatable; at
    /// most 64 MiB in all: bind larger data with --ro-bind).
    #[arg(long = "file", value_name = "NAME=PATH")]
    pub files: Vec<String>,
    /// Show a host directory read-only at DST, one new top-level directory (`/data`), as a
    /// private overlay like the host's /usr (repeatable).
    #[arg(long = "ro-bind", value_name = "SRC:DST")]
    pub ro_binds: Vec<String>,
    /// Copy what the program wrote in /workspace into this host directory after the run
    /// (as the caller; the files are listed in the `--json` result too).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// `host` (read-only /usr of this machine) or a root filesystem directory.
    #[arg(long, value_name = "host|DIR", default_value = EXEC_ROOTFS)]
    pub rootfs: String,
    /// Accept running without a layer the host lacks (reported in the result).
    #[arg(long, value_name = "LAYER", value_delimiter = ',')]
    pub allow_degraded: Vec<DegradeArg>,
    /// Which limits backend to use; forcing one the host lacks is an error.
    #[arg(long, value_name = "BACKEND", default_value = LIMITS_BACKEND)]
    pub limits_backend: BackendArg,
    /// Hostname inside the sandbox.
    #[arg(long, default_value = spec::DEFAULT_HOSTNAME)]
    pub hostname: String,
    #[command(flatten)]
    pub net: NetArgs,
    /// The command and its arguments. `--` before it is optional: the first argument that
    /// is not one of cordon's options starts the command, and every argument after it is the
    /// command's, options and all.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl ExecArgs {
    /// The sandbox these arguments describe (reads the `--file` files).
    pub fn to_spec(&self) -> Result<SandboxSpec, String> {
        let nonzero = |v: u64| if v == 0 { None } else { Some(v) };
        let mut s = SandboxSpec::new(self.command.clone());
        s.network = self
            .net
            .network()
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let mut total = 0u64;
        for f in &self.files {
            let file = crate::run::read_input_file(f).map_err(|e| e.to_string())?;
            total += file.contents.len() as u64;
            if total > crate::run::MAX_INPUT_BYTES {
                return Err(format!(
                    "--file: the files add up to more than the {}-byte input cap; show large data read-only with --ro-bind SRC:/data instead",
                    crate::run::MAX_INPUT_BYTES
                ));
            }
            s.files.push(file);
        }
        if !self.ro_binds.is_empty() && self.allow_degraded.contains(&DegradeArg::Overlay) {
            // Degraded, the view would be a plain bind: a unix socket below it would connect
            // to the host's listener (Landlock does not govern connecting by path).
            return Err("--ro-bind cannot be combined with --allow-degraded overlay: the directory would then be bound as it is, and a unix socket in it would reach the host process listening on it".into());
        }
        for b in &self.ro_binds {
            s.binds.push(ro_bind(b)?);
        }
        // Collected only for --output-dir: a collection changes how a run that cordon ends
        // (timeout, memory) stops: through init, which kills the rest and walks /workspace.
        if self.output_dir.is_some() {
            s.collect = Some(crate::spec::Collect {
                max_files: self.collect_files,
                max_bytes: self.collect_size,
                ..crate::spec::Collect::default()
            });
        }
        s.env = self.env.clone();
        s.hostname = self.hostname.clone();
        s.rootfs = if self.rootfs == "host" {
            Rootfs::Host
        } else {
            Rootfs::Dir(PathBuf::from(&self.rootfs))
        };
        s.exact_output = self.output_encoding == Some(crate::outcome::OutputEncoding::Base64);
        s.stdin = match &self.stdin {
            Some(p) => StdinSource::File(p.clone()),
            None => StdinSource::Forward,
        };
        s.degrade = DegradeArg::degrade(&self.allow_degraded);
        s.backend = self.limits_backend.choice();
        let l = &mut s.limits;
        l.wall = self.timeout;
        // 0 = none, as for --memory, --cpus and --pids.
        l.cpu_time = self.cpu_time.filter(|t| !t.is_zero());
        if let Some(m) = self.memory {
            l.memory = nonzero(m);
        }
        if let Some(c) = self.cpus {
            l.cpus = if c == 0.0 { None } else { Some(c) };
        }
        l.pids = nonzero(self.pids);
        l.output = self.output_limit;
        l.file_size = nonzero(self.file_size);
        l.open_files = self.open_files;
        l.workspace_size = self.workspace_size;
        l.workspace_inodes = self.workspace_inodes;
        l.tmp_size = self.tmp_size;
        s.passthrough = !self.json;
        s.stream = (self.json && self.stream).then(|| self.output_encoding.unwrap_or_default());
        Ok(s)
    }
}

/// `--cpus`: a number (its range is checked with the other limits: above 0, or 0 for none).
/// Negative numbers reach here, to be refused with that check's message, not clap's tip.
fn parse_cpus(s: &str) -> Result<f64, String> {
    s.parse()
        .map_err(|_| "expected a number of CPUs, such as 1, 0.5 or 2 (0 = no limit)".to_string())
}

/// `cordon run --collect-files`: checked as `exec`'s is, kept as a count.
fn collect_files_arg(s: &str) -> Result<u64, spec::ParseError> {
    spec::parse_collect_files(s).map(|n| n as u64)
}

/// `cordon run --collect-size`: checked as `exec`'s is, kept as given (as run's other sizes).
fn collect_size_arg(s: &str) -> Result<String, spec::ParseError> {
    spec::parse_collect_size(s).map(|_| s.to_string())
}

/// A count (`--pids`, `--open-files`, `--workspace-inodes`): a whole number.
fn parse_count(s: &str) -> Result<u64, String> {
    s.parse()
        .map_err(|_| "expected a whole number, such as 64".to_string())
}

/// `--ro-bind SRC:DST`: SRC an existing host directory (resolved now, symlinks and all, so
/// the sandbox gets what the caller named), DST one new top-level directory (checked with the
/// rest of the spec).
pub(crate) fn ro_bind(arg: &str) -> Result<crate::spec::Bind, String> {
    let (src, dst) = arg.rsplit_once(':').ok_or_else(|| {
        format!("--ro-bind `{arg}`: write it as SRC:DST, e.g. --ro-bind ./data:/data")
    })?;
    let resolved = std::fs::canonicalize(src)
        .map_err(|e| format!("--ro-bind {arg}: cannot resolve {src}: {e}"))?;
    if !resolved.is_dir() {
        return Err(format!(
            "--ro-bind {arg}: {} is not a directory; pass a single file with --file NAME=PATH",
            resolved.display()
        ));
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| e.to_string())
        .and_then(|t| crate::limits::MountInfo::parse(&t))
        .map_err(|e| format!("--ro-bind {arg}: cannot read /proc/self/mountinfo: {e}"))?;
    crate::fs::plan::check_bind_source(&resolved, &mounts)
        .map_err(|why| format!("--ro-bind {arg}: {why}"))?;
    Ok(crate::spec::Bind {
        src: resolved,
        dst: dst.to_string(),
        writable: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_requested_among_cordons_options_of_exec_and_run() {
        let answer = |line: &str| json_answer(line.split(' ').map(std::ffi::OsString::from));
        let asks = |line: &str| answer(line) == JsonAnswer::Object;
        assert!(asks("cordon exec --json --memory 12X -- true"));
        assert!(asks("cordon run --lang python --json a.py x"));
        assert!(!asks("cordon exec --memory 12X -- echo --json"));
        assert!(!asks("cordon exec --memory 12X echo --json"));
        assert!(!asks("cordon exec -e --json true"));
        assert!(asks("cordon exec --timeout 5s -e A=1 --json true"));
        assert!(asks("cordon exec --memory=12X --json true"));
        assert!(!asks("cordon doctor --json"));
        assert!(!asks("cordon"));
        // Requests are answered in JSON, a batch (and its workers) one line each.
        assert!(asks("cordon run --request - --bogus"));
        assert!(asks("cordon run --request=r.json --lang node"));
        assert_eq!(
            answer("cordon run --requests r.jsonl --bogus"),
            JsonAnswer::Line
        );
        assert_eq!(
            answer("cordon run --json --requests=r.jsonl"),
            JsonAnswer::Line
        );
        assert_eq!(
            answer("cordon run --request - --request-line 3"),
            JsonAnswer::Line
        );
        assert_eq!(
            answer("cordon run --lang bash a.sh -- --request"),
            JsonAnswer::No
        );
        assert_eq!(answer("cordon run --request-netx"), JsonAnswer::No);
        assert_eq!(answer("cordon exec --request - true"), JsonAnswer::No);
    }

    /// A flag refused next to --request says where the request's parts go instead, and the
    /// flags it names as applying are `run`'s own.
    #[test]
    fn a_usage_error_with_a_request_says_fields_are_not_flags() {
        use clap::CommandFactory;
        let run_err = |line: &str| {
            let args: Vec<std::ffi::OsString> =
                line.split(' ').map(std::ffi::OsString::from).collect();
            OneCli::<RunCommand>::try_parse_from(&args)
                .map(drop)
                .map_err(|e| with_run_args_tip(e, &args).to_string())
                .unwrap_err()
        };
        for line in [
            "cordon run --request - --bogus",
            "cordon run --request - --lang node",
            "cordon run --requests b.jsonl -c print(1)",
            "cordon run --request=- a.py",
        ] {
            let e = run_err(line);
            assert!(
                e.contains("are the JSON request's fields, not flags (language, code,")
                    && e.contains("--output-root")
                    && !e.contains("go after `--`"),
                "{line}: {e}"
            );
        }
        assert!(run_err("cordon run --request - --bogus").contains("'--bogus'"));
        assert!(run_err("cordon run --request - --lang node").contains("'--lang <LANG>'"));
        // A misspelt flag keeps clap's suggestion.
        let e = run_err("cordon run --request - --timout 5s");
        assert!(e.contains("--timeout"), "{e}");
        // Without a request, the program's-arguments tip as before.
        let e = run_err("cordon run --lang bash a.sh x");
        assert!(e.contains("go after `--`"), "{e}");
        // `-c CODE a b`: `a` was taken for FILE; the tip is -c's, not one that drops `a`.
        let e = run_err("cordon run --lang bash -c echo a b");
        assert!(
            e.contains("unexpected argument 'b'") && e.contains("-c CODE -- ARGS"),
            "{e}"
        );
        // A language where FILE goes: the tip is --lang's.
        for line in ["cordon run python -c print(1)", "cordon run py app.py"] {
            let e = run_err(line);
            assert!(
                e.contains("was taken for FILE; a language goes with --lang: cordon run --lang py"),
                "{line}: {e}"
            );
            assert!(!e.contains("go after `--`"), "{line}: {e}");
        }
        assert!(!run_err("cordon run --lang python python x").contains("taken for FILE"));
        // Only the argument taken for FILE: not a later one, nor an option's value.
        assert!(!run_err("cordon run build.sh go test").contains("taken for FILE"));
        assert!(run_err("cordon run --timeout 5s go x.go").contains("`go` was taken for FILE"));
        assert!(!run_err("cordon run --file go=x.go x y").contains("taken for FILE"));
        // exec: an unknown option is not offered as a command to run; a misspelt one keeps
        // clap's suggestion.
        let exec_err = |line: &str| {
            let args: Vec<std::ffi::OsString> = line.split(' ').map(Into::into).collect();
            OneCli::<ExecCommand>::try_parse_from(&args)
                .map(drop)
                .map_err(|e| with_exec_option_tip(e).to_string())
                .unwrap_err()
        };
        let e = exec_err("cordon exec --bogus true");
        assert!(
            e.contains("cordon exec has no option --bogus") && !e.contains("use '-- --bogus'"),
            "{e}"
        );
        assert!(exec_err("cordon exec --jsn true").contains("'--json'"));
        let cmd = OneCli::<RunCommand>::command();
        let run = cmd.find_subcommand("run").unwrap();
        let longs: Vec<&str> = run.get_arguments().filter_map(|a| a.get_long()).collect();
        for named in REQUEST_MODE_FLAGS
            .iter()
            .flat_map(|f| f.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')))
            .filter_map(|w| w.strip_prefix("--"))
        {
            assert!(longs.contains(&named), "--{named} is not a flag of run");
        }
    }

    #[test]
    fn the_short_path_for_exec_and_run_parses_and_helps_like_the_full_one() {
        use clap::CommandFactory;
        let mut full = Cli::command();
        for (name, mut short) in [
            ("exec", OneCli::<ExecCommand>::command()),
            ("run", OneCli::<RunCommand>::command()),
        ] {
            let f = full.find_subcommand_mut(name).unwrap();
            let s = short.find_subcommand_mut(name).unwrap();
            assert_eq!(
                f.render_help().to_string(),
                s.render_help().to_string(),
                "{name} -h"
            );
            assert_eq!(
                f.render_long_help().to_string(),
                s.render_long_help().to_string(),
                "{name} --help"
            );
        }
        for argv in [
            &[
                "cordon", "exec", "--memory", "64M", "--json", "--", "echo", "hi",
            ][..],
            &[
                "cordon",
                "run",
                "--lang",
                "python",
                "-c",
                "print(1)",
                "--timeout",
                "2s",
            ],
            &["cordon", "exec", "--no-such-flag", "--", "true"],
            &["cordon", "run", "--memory"],
        ] {
            let f = Cli::try_parse_from(argv).map_err(|e| e.to_string());
            let s = if argv[1] == "exec" {
                OneCli::<ExecCommand>::try_parse_from(argv).map(OneCli::into_cli)
            } else {
                OneCli::<RunCommand>::try_parse_from(argv).map(OneCli::into_cli)
            }
            .map_err(|e| e.to_string());
            assert_eq!(format!("{f:?}"), format!("{s:?}"), "{argv:?}");
            // The last two are usage errors: their messages are what was compared.
            assert_eq!(
                f.is_err(),
                argv.contains(&"--no-such-flag") || argv.ends_with(&["--memory"]),
                "{argv:?}"
            );
        }
    }

    #[test]
    fn flags_map_to_the_spec() {
        let cli = Cli::try_parse_from([
            "cordon",
            "exec",
            "--memory",
            "64M",
            "--pids",
            "0",
            "--timeout",
            "2s",
            "-e",
            "A=1",
            "--json",
            "--",
            "echo",
            "--not-a-flag",
        ])
        .unwrap();
        let Command::Exec(a) = cli.command else {
            panic!("exec expected")
        };
        let s = a.to_spec().unwrap();
        assert_eq!(s.argv, vec!["echo", "--not-a-flag"]);
        assert_eq!(s.limits.memory, Some(64 << 20));
        assert_eq!(s.limits.pids, None);
        assert_eq!(s.limits.wall, std::time::Duration::from_secs(2));
        assert_eq!(s.env, vec![("A".to_string(), "1".to_string())]);
        assert!(!s.passthrough);
    }

    #[test]
    fn files_binds_and_output_dir_map_to_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.sh");
        std::fs::write(&input, "echo hi\n").unwrap();
        std::fs::set_permissions(&input, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let exec = |extra: &[&str]| {
            let mut argv = vec!["cordon", "exec"];
            argv.extend_from_slice(extra);
            argv.extend_from_slice(&["--", "true"]);
            let Command::Exec(a) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("exec expected")
            };
            a.to_spec()
        };
        let file_arg = format!("bin/in.sh={}", input.display());
        let bind_arg = format!("{}/./:/data", dir.path().display());
        let s = exec(&["--file", &file_arg, "--ro-bind", &bind_arg]).unwrap();
        assert_eq!(s.files.len(), 1);
        assert_eq!(s.files[0].path, "bin/in.sh");
        assert_eq!(s.files[0].contents, b"echo hi\n");
        assert_eq!(
            s.files[0].mode, 0o755,
            "an executable input stays executable"
        );
        let canonical = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            s.binds,
            [crate::spec::Bind {
                src: canonical,
                dst: "/data".into(),
                writable: false
            }]
        );
        // Files are collected only when they are delivered.
        assert!(s.collect.is_none());
        assert!(exec(&["--json"]).unwrap().collect.is_none());
        assert!(exec(&["--output-dir", "/tmp/x"]).unwrap().collect.is_some());
        let e = exec(&["--file", "noequals"]).unwrap_err();
        assert!(e.contains("NAME=PATH"), "{e}");
    }

    /// --collect-files and --collect-size set exec's collection (defaults 1000 and 64 MiB)
    /// and run's overrides, which batch workers get as given; a value out of range or not a
    /// number is a usage error naming the flag, the value and the range, for exec (on both
    /// of its parsers) and run alike.
    #[test]
    fn collection_caps_map_to_the_spec_and_are_bounded() {
        let exec = |extra: &[&str]| {
            let mut argv = vec!["cordon", "exec", "--output-dir", "/tmp/x"];
            argv.extend_from_slice(extra);
            argv.extend_from_slice(&["--", "true"]);
            Cli::try_parse_from(argv).map(|c| {
                let Command::Exec(a) = c.command else {
                    panic!("exec expected")
                };
                a.to_spec().unwrap().collect.expect("a collection")
            })
        };
        let c = exec(&[]).unwrap();
        assert_eq!((c.max_files, c.max_bytes), (1000, 64 << 20));
        assert_eq!(c, crate::spec::Collect::default());
        let c = exec(&["--collect-files", "1500", "--collect-size=100M"]).unwrap();
        assert_eq!((c.max_files, c.max_bytes), (1500, 100 << 20));
        assert!(c.contents && c.only.is_none());

        let run = |extra: &[&str]| {
            let mut argv = vec!["cordon", "run", "--lang", "bash", "-c", "true"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| {
                let Command::Run(a) = c.command else {
                    panic!("run expected")
                };
                a.limits
            })
        };
        let l = run(&["--collect-files", "3", "--collect-size", "1k"]).unwrap();
        let o = l.run_overrides();
        assert_eq!(
            (o.collect_files, o.collect_size.as_deref()),
            (Some(3), Some("1k"))
        );
        let mut c = crate::spec::Collect::default();
        o.apply_collect(&mut c).unwrap();
        assert_eq!((c.max_files, c.max_bytes), (3, 1024));
        assert!(l.compile_overrides().collect_files.is_none());
        let args = l.to_args();
        assert!(
            args.contains(&"--collect-files=3".to_string())
                && args.contains(&"--collect-size=1k".to_string()),
            "{args:?}"
        );
        let l = run(&[]).unwrap();
        assert!(!l.run_overrides().sets_collect());

        for (flag, value, range) in [
            ("--collect-files", "0", "1 to 100000 files"),
            ("--collect-files", "100001", "1 to 100000 files"),
            ("--collect-files", "many", "1 to 100000 files"),
            ("--collect-size", "0", "1 byte to 1G"),
            ("--collect-size", "2G", "1 byte to 1G"),
            ("--collect-size", "lots", "1 byte to 1G"),
        ] {
            for e in [
                exec(&[flag, value]).unwrap_err().to_string(),
                run(&[flag, value]).unwrap_err().to_string(),
            ] {
                assert!(
                    e.contains(&format!("'{value}' for '{flag} <"))
                        && e.contains(range)
                        && !e.contains("lift the limit"),
                    "{flag} {value}: {e}"
                );
            }
            let args =
                [flag, value, "--output-dir", "/tmp/x", "--", "true"].map(std::ffi::OsString::from);
            assert!(
                fast::exec(&args).is_none(),
                "the fast path leaves {flag} {value} to clap"
            );
        }
        assert!(
            exec(&["--collect-size", "1.5G"])
                .unwrap_err()
                .to_string()
                .contains("cordon holds the files it receives in memory")
        );
        // The fast path reads good values as clap does.
        let args = [
            "--collect-files",
            "7",
            "--collect-size=2M",
            "--output-dir=/tmp/x",
            "--",
            "true",
        ]
        .map(std::ffi::OsString::from);
        let a = fast::exec(&args).expect("the fast path takes it");
        assert_eq!((a.collect_files, a.collect_size), (7, 2 << 20));
        // Without --output-dir exec collects nothing: a cap there is a mistake, refused by
        // clap (which the fast path leaves it to), not silently ignored.
        for flag in ["--collect-files=7", "--collect-size=2M"] {
            let args = [flag, "--", "true"].map(std::ffi::OsString::from);
            assert!(fast::exec(&args).is_none(), "{flag}");
            let e = Cli::try_parse_from(["cordon", "exec", flag, "--", "true"])
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(e.contains("--output-dir"), "{flag}: {e}");
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let cli = Cli::try_parse_from(["cordon", "exec", "--", "true"]).unwrap();
        let Command::Exec(a) = cli.command else {
            panic!("exec expected")
        };
        let s = a.to_spec().unwrap();
        // README's defaults table, field by field (tmp_inodes is not in it).
        let documented = crate::spec::Limits {
            wall: std::time::Duration::from_secs(30),
            cpu_time: None,
            memory: Some(512 << 20),
            cpus: Some(1.0),
            pids: Some(64),
            output: 10 << 20,
            file_size: Some(256 << 20),
            open_files: 1024,
            workspace_size: 256 << 20,
            workspace_inodes: 16384,
            tmp_size: 64 << 20,
            tmp_inodes: 4096,
        };
        assert_eq!(crate::spec::Limits::default(), documented);
        assert_eq!(s.limits, documented, "exec's flag defaults");
        assert!(s.passthrough);
        assert!(Cli::try_parse_from(["cordon", "exec", "--memory", "lots", "--", "true"]).is_err());
    }

    /// --cpu-time's help says what it limits without a cgroup: each process, not the sandbox.
    #[test]
    fn cpu_time_help_says_per_process_without_a_cgroup() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        for name in ["exec", "run"] {
            let help = cli
                .find_subcommand_mut(name)
                .unwrap()
                .render_long_help()
                .to_string();
            let at = help.find("--cpu-time").unwrap();
            let text: String = help[at..]
                .split("\n\n")
                .next()
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                text.contains("with a cgroup, summed over the whole sandbox")
                    && text.contains("without one, per process only (RLIMIT_CPU"),
                "{name}: {text}"
            );
        }
    }

    /// 0 lifts --memory, --file-size and --cpu-time: a value above 0 that rounds to 0 is
    /// refused, and so is a memory limit in bytes that was meant in megabytes.
    #[test]
    fn exec_refuses_limits_that_round_to_zero_or_a_memory_limit_in_bytes() {
        for (flag, value, hint) in [
            ("--memory", "0.4", "less than one byte"),
            ("--memory", "512", "did you mean 512M?"),
            ("--file-size", "0.4", "less than one byte"),
            ("--cpu-time", "0.0000000001", "less than a nanosecond"),
            // Would overflow `Instant + Duration` after the clone.
            ("--timeout", "10000000000000000000", "100 years"),
            ("--cpu-time", "3155760001", "100 years"),
        ] {
            let e = Cli::try_parse_from(["cordon", "exec", flag, value, "--", "true"])
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag) && e.contains(hint), "{flag} {value}: {e}");
            let args =
                [flag, value, "--output-dir", "/tmp/x", "--", "true"].map(std::ffi::OsString::from);
            assert!(
                fast::exec(&args).is_none(),
                "the fast path leaves {flag} {value} to clap"
            );
        }
    }
}

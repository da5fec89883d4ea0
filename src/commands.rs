//! The CLI's commands, on top of the library: turn parsed arguments into requests, print
//! results, pick exit codes. `main.rs` only dispatches here.

use crate::cli::{ExecArgs, JsonAnswer, RunArgs};
use crate::outcome::{ErrorKind, Outcome, OutputEncoding, exit_codes};
use crate::run::{RunError, RunOptions, RunRequest};
use crate::spec::{InputFile, Rootfs, StdinSource};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;

/// Writes `v` and a newline to stdout, encoding as it goes (a result holding 10 MiB of output
/// is never built as one more string in memory).
fn print_json(v: &impl serde::Serialize, pretty: bool) -> i32 {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let written = if pretty {
        serde_json::to_writer_pretty(&mut out, v)
    } else {
        serde_json::to_writer(&mut out, v)
    }
    .map_err(|e| e.to_string())
    .and_then(|()| {
        out.write_all(b"\n")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())
    });
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cordon: cannot write the result: {e}");
            exit_codes::SANDBOX_ERROR
        }
    }
}

/// What `cordon run --request` prints: the outcome itself, or the error object.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum JsonResult {
    Outcome(Box<Outcome>),
    Error(ErrorJson),
}

/// A request's answer: its result, after the request's `id` when it has one.
#[derive(serde::Serialize)]
struct Answer {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<serde_json::Value>,
    #[serde(flatten)]
    result: JsonResult,
}

/// The JSON object printed when cordon failed before anything ran: the result's fields that
/// say so (no program ran, so no `exitCode`), in the result's order (`success` first).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorJson {
    success: bool,
    status: crate::outcome::Status,
    exit_code: Option<i32>,
    message: String,
    error_kind: ErrorKind,
    cli_exit_code: i32,
}

fn error_json(message: &str, kind: ErrorKind) -> ErrorJson {
    ErrorJson {
        success: false,
        status: crate::outcome::Status::SandboxError,
        exit_code: None,
        message: message.to_string(),
        error_kind: kind,
        cli_exit_code: exit_codes::SANDBOX_ERROR,
    }
}

/// A command line cordon cannot parse, when it asked to be answered in JSON (`--json`,
/// `--request`, `--requests`): the error object on stdout (so that a caller reading JSON gets
/// an answer; one line for `--requests`), clap's message in it, with its tip and without the
/// usage; clap's own text still goes to stderr.
pub fn usage_error_json(rendered: &str, answer: JsonAnswer) {
    if answer == JsonAnswer::No {
        return;
    }
    print_json(
        &error_json(&usage_message(rendered), ErrorKind::Request),
        answer == JsonAnswer::Object,
    );
}

/// clap's rendered error as one line: without its usage and "For more information"; the
/// items of a list that a line ends in a colon to introduce (clap indents them) joined to it
/// with ", ", other lines and paragraphs (clap's tips, one a line) with "; ".
fn usage_message(rendered: &str) -> String {
    let text = rendered.trim().trim_start_matches("error: ");
    let text = text
        .split("\n\nUsage:")
        .next()
        .unwrap_or(text)
        .split("\n\nFor more information")
        .next()
        .unwrap_or(text);
    let mut message = String::new();
    let mut listing = false;
    for line in text.split('\n') {
        let item = line.trim();
        if item.is_empty() {
            listing = false;
            continue;
        }
        let indented = line.starts_with(' ');
        if !message.is_empty() {
            message.push_str(match (listing && indented, message.ends_with(':')) {
                (true, true) => " ",
                (true, false) => ", ",
                (false, _) => "; ",
            });
        }
        listing = (listing && indented) || item.ends_with(':');
        message.push_str(item);
    }
    message
}

/// Prints an outcome the way the CLI does and returns the exit code.
/// Prints the result (`--json`), or in text mode what the program's own output does not
/// show: a compile or install failure, cordon's message, refused connections, and files that
/// `--output-dir` (`delivered`) did not get.
fn report(outcome: &Outcome, answer: JsonAnswer, delivered: bool) -> i32 {
    if answer != JsonAnswer::No {
        if print_json(outcome, answer == JsonAnswer::Object) != 0 {
            return exit_codes::SANDBOX_ERROR;
        }
    } else {
        // The compiler's messages: all of them when it failed, its warnings (stderr) when it
        // succeeded, as `cargo run` shows them, again for an artifact from the cache (kept
        // with it), as cargo replays a cached crate's warnings.
        if let Some(c) = &outcome.compile {
            let _ = std::io::stderr().write_all(c.error.as_bytes());
            if c.status != crate::Status::Ok {
                let _ = std::io::stderr().write_all(c.output.as_bytes());
            }
        }
        if let Some(d) = &outcome.dependencies
            && !d.cached
            && d.status != crate::Status::Ok
        {
            let _ = std::io::stderr().write_all(d.error.as_bytes());
            let _ = std::io::stderr().write_all(d.output.as_bytes());
        }
        if let Some(m) = &outcome.message {
            eprintln!(
                "cordon: {}: {}",
                outcome.status.as_str(),
                escape_controls(m)
            );
        }
        if let (true, Some(first)) = (delivered, outcome.files_omitted.first()) {
            eprintln!(
                "cordon: {} file(s) the program wrote were not copied to --output-dir (first: {}: {}); --json lists them all",
                outcome.files_omitted.len(),
                escape_controls(&first.path),
                escape_controls(&first.reason)
            );
        }
        if let Some(n) = outcome.network.as_ref().filter(|n| !n.refused.is_empty()) {
            let count: u64 = n.refused.iter().map(|r| r.count).sum();
            eprintln!(
                "cordon: the network proxy refused {count} request(s) (first: {}:{}: {}); see --net-log or --json",
                n.refused[0].host, n.refused[0].port, n.refused[0].reason
            );
        }
    }
    outcome.cli_exit_code
}

fn fail(e: impl std::fmt::Display, kind: ErrorKind, json: bool) -> i32 {
    fail_as(e, kind, JsonAnswer::from_json_flag(json))
}

/// cordon failed before anything ran: says so on stderr and, unless the answer is text, as
/// the error object on stdout (one line for `--requests`).
fn fail_as(e: impl std::fmt::Display, kind: ErrorKind, answer: JsonAnswer) -> i32 {
    if answer != JsonAnswer::No {
        print_json(
            &error_json(&e.to_string(), kind),
            answer == JsonAnswer::Object,
        );
    }
    eprintln!("cordon: {e}");
    exit_codes::SANDBOX_ERROR
}

/// In text mode, says on stderr when a limit the caller asked for explicitly was not
/// enforced, or only per process (the JSON result always says how each limit was enforced).
fn warn_weak_limits(outcome: &Outcome, cpus: bool, memory: bool) {
    use crate::outcome::Enforcement;
    let l = &outcome.limits;
    if cpus && let Some(r) = l.cpus.as_ref() {
        let fraction = r.value.is_some_and(|v| v.fract() != 0.0);
        if r.enforcement == Enforcement::NotEnforced {
            eprintln!(
                "cordon: warning: --cpus is not enforced on this host: {}",
                r.note.as_deref().unwrap_or("")
            );
        } else if r.enforcement == Enforcement::Affinity && fraction {
            eprintln!(
                "cordon: warning: --cpus {} is held as whole CPUs here (no cgroup: {})",
                r.value.unwrap_or_default(),
                r.note.as_deref().unwrap_or("")
            );
        } else if let Some((_, beyond)) = r
            .note
            .as_deref()
            .and_then(|n| n.split_once("; more than the "))
        {
            // The note goes on with how the limit is held and the fixes for a fraction:
            // the warning is about the count alone.
            let beyond = match beyond.split_once("at most ") {
                Some((head, tail)) => {
                    let n: String = tail.chars().take_while(char::is_ascii_digit).collect();
                    format!("{head}at most {n}")
                }
                None => beyond.to_string(),
            };
            eprintln!(
                "cordon: warning: --cpus {} is more than the {beyond}",
                r.value.unwrap_or_default()
            );
        }
    }
    // The JSON result's memory note says in brief what the watch refuses (`cordon doctor` and
    // the README have the whole account); the terminal gets what it means for the caller.
    if memory
        && l.memory_bytes
            .as_ref()
            .is_some_and(|r| r.enforcement == Enforcement::Rlimit)
    {
        eprintln!(
            "cordon: warning: --memory is not held by a cgroup here (none is available; see `cordon doctor`), but by RLIMIT_DATA and a sum over the sandbox polled every 20-50 ms: a fast allocation can overshoot it by one interval before the kill, and some kernel memory is refused or not counted (`--json` lists how it was enforced)"
        );
    }
}

/// The refusal of `--output-encoding` where no JSON result is printed: the program's output
/// then passes through as it is.
const OUTPUT_ENCODING_WITHOUT_JSON: &str = "--output-encoding says how the JSON result holds the program's output, and without --json there is none (the output passes through as the program wrote it, bytes and all); add --json, or leave --output-encoding out";

const STREAM_WITHOUT_JSON: &str = "--stream prints the program's output as JSON lines before the JSON result, and without --json there is none (the output passes through as it is, live); add --json, or leave --stream out";

/// `cordon exec`.
pub fn exec(args: &ExecArgs) -> i32 {
    if args.output_encoding.is_some() && !args.json {
        return fail(OUTPUT_ENCODING_WITHOUT_JSON, ErrorKind::Request, false);
    }
    if args.stream && !args.json {
        return fail(STREAM_WITHOUT_JSON, ErrorKind::Request, false);
    }
    // With --stream, the result is the last of the JSON lines.
    let answer = JsonAnswer::of(args.json, args.stream);
    let fail = |e: &dyn std::fmt::Display, kind| fail_as(e, kind, answer);
    let spec = match args.to_spec() {
        Ok(s) => s,
        Err(e) => return fail(&e, ErrorKind::Request),
    };
    // A --rootfs DIR that is not there: said in exec's terms (the launcher's own error also
    // covers the rootfs a profile of `cordon run` names).
    if let crate::spec::Rootfs::Dir(dir) = &spec.rootfs
        && let Err(e) = std::fs::metadata(dir)
    {
        let msg = format!(
            "cannot use --rootfs {}: {e}; give an extracted root filesystem directory (one with usr/ or bin/), or `--rootfs host` for this host's read-only /usr",
            dir.display()
        );
        return fail(&msg, ErrorKind::Request);
    }
    // Opened before the run: a bad directory is reported now, not after it.
    let output_dir = match args
        .output_dir
        .as_deref()
        .map(crate::output::OutputDir::open)
    {
        Some(Err(e)) => return fail(&e, ErrorKind::Request),
        Some(Ok(d)) => Some(d),
        None => None,
    };
    match crate::run_spec(&spec) {
        Ok(mut outcome) => {
            if let Some(dir) = &output_dir {
                dir.deliver(&mut outcome);
            }
            outcome.encode_output(args.output_encoding.unwrap_or_default());
            if !args.json {
                warn_weak_limits(
                    &outcome,
                    args.cpus.is_some_and(|c| c > 0.0),
                    args.memory.is_some_and(|m| m > 0),
                );
            }
            report(&outcome, answer, args.output_dir.is_some())
        }
        Err(e) => {
            let kind = e.kind();
            fail(&e, kind)
        }
    }
}

fn run_options(args: &RunArgs) -> RunOptions {
    RunOptions {
        profiles: args.profiles.clone(),
        rootfs: args.rootfs.as_ref().map(|r| {
            if r == "host" {
                Rootfs::Host
            } else {
                Rootfs::Dir(PathBuf::from(r))
            }
        }),
        degrade: crate::cli::DegradeArg::degrade(&args.allow_degraded),
        backend: args.limits_backend.choice(),
        passthrough: !args.json,
        stream: args.stream,
        cache: !args.no_cache,
        history: !args.no_history,
        collect: true,
        output_root: args.output_root.clone(),
        request_net: args.request_net.unwrap_or(crate::run::RequestNet::Any),
        request_limits: (args.limits.run_overrides(), args.limits.compile_overrides()),
    }
}

fn request_from_args(args: &RunArgs) -> Result<RunRequest, RunError> {
    let mut stdin = match &args.stdin {
        Some(p) => StdinSource::File(p.clone()),
        None => StdinSource::Forward,
    };
    const NO_CODE: &str =
        "give the code: a FILE, `-c CODE`, or `-` to read it from stdin (or use --request)";
    if args.code.is_none() && args.file.is_none() {
        return Err(RunError::Request(NO_CODE.into()));
    }
    // Before the code is read: `-` without --lang is refused before waiting on stdin.
    let lang = match &args.lang {
        Some(lang) => lang.clone(),
        None => crate::profile::infer(args.file.as_deref(), &args.profiles)
            .map_err(RunError::Request)?,
    };
    let code: Vec<u8> = match (&args.code, &args.file) {
        (Some(c), _) => c.clone().into_bytes(),
        (None, Some(p)) if p.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| RunError::Request(format!("cannot read the code from stdin: {e}")))?;
            if args.stdin.is_none() {
                stdin = StdinSource::Null;
            }
            buf
        }
        (None, Some(p)) => std::fs::read(p)
            .map_err(|e| RunError::Request(format!("cannot read {}: {e}", p.display())))?,
        (None, None) => return Err(RunError::Request(NO_CODE.into())),
    };
    let mut files = vec![InputFile {
        path: String::new(),
        contents: code,
        mode: 0o644,
    }];
    for f in &args.files {
        files.push(crate::run::read_input_file(f)?);
    }
    let network = args
        .net
        .network()
        .map_err(|e| RunError::Request(e.to_string()))?
        .unwrap_or_default();
    if !args.ro_binds.is_empty()
        && args
            .allow_degraded
            .contains(&crate::cli::DegradeArg::Overlay)
    {
        return Err(RunError::Request("--ro-bind cannot be combined with --allow-degraded overlay: the directory would then be bound as it is, and a unix socket in it would reach the host process listening on it".into()));
    }
    let binds = args
        .ro_binds
        .iter()
        .map(|b| crate::cli::ro_bind(b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(RunError::Request)?;
    Ok(RunRequest {
        binds,
        network,
        exact_output: args.output_encoding == Some(OutputEncoding::Base64),
        packages: args.packages.clone(),
        package_index: args.package_index.clone(),
        packages_lock: match &args.packages_lock {
            Some(p) => Some(std::fs::read(p).map_err(|e| {
                RunError::Request(format!("cannot read --packages-lock {}: {e}", p.display()))
            })?),
            None => None,
        },
        language: lang,
        files,
        entry: None,
        code_name: match (&args.code, &args.file) {
            (None, Some(p)) if p.as_os_str() != "-" => {
                p.file_name().and_then(|n| n.to_str()).map(str::to_string)
            }
            _ => None,
        },
        args: args.args.clone(),
        stdin,
        env: args.env.clone(),
        limits: args.limits.run_overrides(),
        compile_limits: args.limits.compile_overrides(),
        output_dir: args.output_dir.clone(),
    })
}

/// Runs one JSON request text and returns the result plus the exit code. `line`: the
/// request's line in a `--requests` file, which its errors name. `encoding`: how the result
/// holds the program's output when the request does not say (`--output-encoding`).
fn run_json_text(
    text: &[u8],
    opts: &RunOptions,
    line: Option<usize>,
    encoding: OutputEncoding,
) -> (Answer, i32) {
    let mut encoding = encoding;
    let mut id = None;
    let outcome = crate::request::parse_bytes(text)
        .and_then(|mut r| {
            encoding = r.output_encoding.unwrap_or(encoding);
            id = r.id.take();
            r.into_run()
        })
        .and_then(|mut r| {
            r.exact_output = encoding == OutputEncoding::Base64;
            let (run, compile) = &opts.request_limits;
            crate::run::confine_request_limits(&mut r, run, compile)?;
            if let (Some(root), Some(dir)) = (&opts.output_root, &r.output_dir) {
                r.output_dir = Some(crate::run::confine_output_dir(dir, root)?);
            }
            crate::run::confine_request_network(&r, opts.request_net)?;
            crate::run::execute(&r, opts)
        });
    match outcome {
        Ok(mut o) => {
            o.encode_output(encoding);
            let code = o.cli_exit_code;
            let result = JsonResult::Outcome(Box::new(o));
            (Answer { id, result }, code)
        }
        Err(e) => {
            let message = match line {
                Some(n) => format!("line {n} of the requests: {e}"),
                None => e.to_string(),
            };
            // A request refused for one of its fields still names itself, if it can.
            let id = id.or_else(|| crate::request::loose_id(text));
            let result = JsonResult::Error(error_json(&message, e.kind()));
            (Answer { id, result }, exit_codes::SANDBOX_ERROR)
        }
    }
}

/// How `cordon run` answers: JSON lines for a batch and its workers and with `--stream`, one
/// JSON object for a request or `--json`, else text.
fn run_answer(args: &RunArgs) -> JsonAnswer {
    if args.requests.is_some() || args.request_line.is_some() {
        JsonAnswer::Line
    } else {
        JsonAnswer::of(args.request.is_some() || args.json, args.stream)
    }
}

/// `cordon run`.
pub fn run(args: &RunArgs) -> i32 {
    let mut opts = run_options(args);
    let answer = run_answer(args);
    // Everything refused before a request or the code is run is the command line's.
    let fail = |e: &dyn std::fmt::Display| fail_as(e, ErrorKind::Request, answer);
    // Every limit flag is checked now, also those a run may not need (a compile's, for an
    // interpreted language): a bad value is an error wherever it was given.
    for o in [&opts.request_limits.0, &opts.request_limits.1] {
        if let Err(e) = o.apply(&mut crate::spec::Limits::default()) {
            return fail(&e);
        }
    }
    if (args.request.is_some() || args.requests.is_some())
        && (args.net.net.is_some()
            || !args.net.resolve.is_empty()
            || args.net.net_log
            || !args.packages.is_empty()
            || args.package_index.is_some()
            || args.packages_lock.is_some())
    {
        return fail(
            &"--net, --net-resolve, --net-log, --packages, --package-index and --packages-lock apply to code given on the command line; in a JSON request use config.network, config.networkResolve, packages, packageIndex and packagesLock",
        );
    }
    if args.request.is_none()
        && args.requests.is_none()
        && (args.output_root.is_some() || args.request_net.is_some())
    {
        let (flag, what, own) = if args.output_root.is_some() {
            (
                "--output-root",
                "where a JSON request's outputDir may be",
                "--output-dir says where its files go",
            )
        } else {
            (
                "--request-net",
                "which network a JSON request may ask for",
                "--net says what network it gets",
            )
        };
        return fail(&format!(
            "{flag} confines {what}, and there is no request here; give --request FILE or --requests FILE, or leave {flag} out (code given on the command line is yours: {own})"
        ));
    }
    if args.output_encoding.is_some()
        && !args.json
        && args.request.is_none()
        && args.requests.is_none()
    {
        return fail(&OUTPUT_ENCODING_WITHOUT_JSON);
    }
    if args.jobs.is_some() && args.requests.is_none() {
        return fail(
            &"--jobs is how many requests of a --requests file run at once; give --requests FILE, or leave --jobs out",
        );
    }
    let streams_whole_answers = match &args.requests {
        Some(_) => args.unordered,
        None => args.json || args.request.is_some(),
    };
    if args.stream && !streams_whole_answers {
        return fail(
            &"--stream prints the program's output as JSON lines before each JSON result: give it with --json, --request FILE, or --requests FILE --unordered (results in input order would hold back the lines of all but the first request), or leave --stream out",
        );
    }
    if args.unordered && args.requests.is_none() {
        return fail(
            &"--unordered prints the results of a --requests file as their requests end; give --requests FILE, or leave --unordered out",
        );
    }
    if (args.request.is_some() || args.requests.is_some())
        && (!args.env.is_empty()
            || !args.files.is_empty()
            || args.stdin.is_some()
            || args.output_dir.is_some()
            || !args.args.is_empty())
    {
        return fail(
            &"--env, --file, --stdin, --output-dir and the program's arguments after `--` apply to code given on the command line; a JSON request gives them as env, files, stdin, outputDir and args (and --output-root confines its outputDir). The limit flags do apply to requests: each is the value of a limit a request leaves out, and the most it may ask for",
        );
    }
    if let Some(path) = &args.request {
        opts.passthrough = false;
        // Never more than the cap and a byte: parse() refuses a text over it by its length.
        let limit = crate::run::MAX_REQUEST_BYTES + 1;
        let mut buf = Vec::new();
        let text = if path.as_os_str() == "-" {
            std::io::stdin()
                .take(limit)
                .read_to_end(&mut buf)
                .map(|_| buf)
        } else {
            std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut buf).map(|_| buf))
        };
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                return fail(&format!("cannot read the request {}: {e}", path.display()));
            }
        };
        let (v, code) = run_json_text(
            &text,
            &opts,
            args.request_line,
            args.output_encoding.unwrap_or_default(),
        );
        // A batch's worker answers in one line, which the batch passes on as it is.
        print_json(&v, answer == JsonAnswer::Object);
        return code;
    }
    if let Some(path) = &args.requests {
        return batch(path, args.jobs.map_or(1, usize::from), args);
    }
    match request_from_args(args).and_then(|r| crate::run::execute(&r, &opts)) {
        Ok(mut o) => {
            o.encode_output(args.output_encoding.unwrap_or_default());
            if !args.json {
                let l = &args.limits;
                warn_weak_limits(
                    &o,
                    l.cpus.is_some_and(|c| c > 0.0),
                    l.memory.as_deref().is_some_and(|m| m != "0"),
                );
            }
            report(&o, answer, args.output_dir.is_some())
        }
        Err(e) => fail_as(&e, e.kind(), answer),
    }
}

/// `--requests FILE.jsonl --jobs N`: each line runs in its own `cordon run --request -`
/// process (a sandbox must be started from a single-threaded process, so concurrency is
/// processes, not threads); results are printed one per line, in input order, or with
/// `--unordered` as each request ends. A request that ends frees its slot at once either
/// way.
fn batch(path: &PathBuf, jobs: usize, args: &RunArgs) -> i32 {
    let input: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        match std::fs::File::open(path) {
            Ok(f) => Box::new(std::io::BufReader::new(f)),
            Err(e) => {
                return fail_as(
                    format!("cannot read the requests {}: {e}", path.display()),
                    ErrorKind::Request,
                    JsonAnswer::Line,
                );
            }
        }
    };
    // Lines as bytes: one that is not UTF-8 is its request's error (which says where), not
    // the whole batch's.
    let lines: Vec<Vec<u8>> = match input
        .split(b'\n')
        .map(|l| {
            l.map(|mut l| {
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                l
            })
        })
        .collect()
    {
        Ok(l) => l,
        Err(e) => {
            return fail_as(
                format!("cannot read the requests {}: {e}", path.display()),
                ErrorKind::Request,
                JsonAnswer::Line,
            );
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let mut common: Vec<String> = vec!["run".into(), "--request".into(), "-".into()];
    for p in &args.profiles {
        common.push("--profile".into());
        common.push(p.display().to_string());
    }
    if let Some(r) = &args.rootfs {
        common.extend(["--rootfs".into(), r.clone()]);
    }
    if args.no_cache {
        common.push("--no-cache".into());
    }
    if args.no_history {
        common.push("--no-history".into());
    }
    if args.stream {
        common.push("--stream".into());
    }
    for d in &args.allow_degraded {
        common.extend(["--allow-degraded".into(), d.name().into()]);
    }
    if let Some(root) = &args.output_root {
        common.extend(["--output-root".into(), root.display().to_string()]);
    }
    if let Some(scope) = args.request_net {
        common.extend(["--request-net".into(), scope.name().into()]);
    }
    if let Some(encoding) = args.output_encoding {
        let name = clap::ValueEnum::to_possible_value(&encoding)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        common.push(format!("--output-encoding={name}"));
    }
    let backend = match args.limits_backend {
        crate::cli::BackendArg::Auto => "auto",
        crate::cli::BackendArg::CgroupV2 => "cgroup-v2",
        crate::cli::BackendArg::CgroupV1 => "cgroup-v1",
        crate::cli::BackendArg::Rlimit => "rlimit",
    };
    common.extend(["--limits-backend".into(), backend.into()]);
    common.extend(args.limits.to_args());

    // Blank lines are skipped (a byte order mark alone, on the first, too).
    let todo: Vec<(usize, Vec<u8>)> = lines
        .into_iter()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.strip_prefix("\u{feff}".as_bytes()).unwrap_or(l);
            !l.iter().all(u8::is_ascii_whitespace)
        })
        .collect();
    // Each worker's output is read by a thread of its own, which sends it here when the
    // worker ends, so that a slow request neither holds up a free slot nor (with
    // --unordered) the results after it. The workers are spawned from this thread, which
    // lives as long as the batch (their parent-death signal follows it).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(usize, WorkerEnd)>();
    let mut results: Vec<Option<String>> = vec![None; todo.len()];
    let mut next = 0;
    let mut running = 0;
    let mut worst = 0;
    let mut printed = 0;
    let mut ended = 0;
    // Results that ended before one ahead of them in the input: held until it is printed,
    // and at most `jobs` of them (a slow request lets the others run on in its place, but
    // the batch does not gather every result behind it).
    let mut held = 0;
    while ended < todo.len() {
        while running < jobs && held < jobs && next < todo.len() {
            let (at, request) = (next, &todo[next]);
            let n = request.0 + 1;
            next += 1;
            running += 1;
            let mut worker = std::process::Command::new(&exe);
            worker
                .args(&common)
                .args(["--request-line".to_string(), n.to_string()])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit());
            // A batch killed (SIGTERM, SIGINT, SIGKILL) takes its workers, and so their
            // sandboxes, with it.
            crate::sys::kill_with_parent(&mut worker);
            let reply = Reply {
                tx: done_tx.clone(),
                at,
                n,
                sent: false,
            };
            let mut child = match worker.spawn() {
                Ok(c) => c,
                Err(e) => {
                    reply.send(Err(format!("cannot start a worker for line {n}: {e}")));
                    continue;
                }
            };
            let pid = child.id();
            let stdin = child.stdin.take();
            let text = request.1.clone();
            let stream = args.stream;
            // The request is written from the reader's thread too: a worker refusing a
            // large request early must not block the batch.
            let spawned = std::thread::Builder::new()
                .name(format!("worker {n}"))
                .spawn(move || {
                    // Output pieces name the request as its result will (which the worker
                    // gives its id).
                    let tag = stream.then(|| line_tag(n, crate::request::loose_id(&text)));
                    if let Some(mut i) = stdin {
                        let _ = i.write_all(&text);
                    }
                    let waited = if let Some(tag) = tag {
                        pass_on_events(child, &tag)
                    } else {
                        child.wait_with_output()
                    };
                    reply.send(waited.map_err(|e| format!("worker for line {n} failed: {e}")));
                });
            if let Err(e) = spawned {
                // The closure, and the reply in it, went with the failure: the worker is
                // stopped here and answered for here.
                let pid = nix::unistd::Pid::from_raw(pid as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = nix::sys::wait::waitpid(pid, None);
                let _ = done_tx.send((
                    at,
                    Err(format!("cannot watch the worker for line {n}: {e}")),
                ));
            }
        }
        // Every worker's reply is sent exactly once (see Reply), and this thread keeps a
        // sender: recv returns while one is running.
        let Ok((i, waited)) = done_rx.recv() else {
            break;
        };
        running -= 1;
        ended += 1;
        let n = todo[i].0 + 1;
        let failed = |message: &str| {
            let id = crate::request::loose_id(&todo[i].1);
            let result = JsonResult::Error(error_json(message, ErrorKind::Setup));
            json_line(&Answer { id, result })
        };
        let result = match waited {
            Ok(o) => {
                worst = worst.max(o.status.code().unwrap_or(exit_codes::SANDBOX_ERROR));
                worker_line(&o.stdout).unwrap_or_else(|| {
                    worst = exit_codes::SANDBOX_ERROR;
                    failed(&format!("worker for line {n} printed no result"))
                })
            }
            Err(message) => {
                worst = exit_codes::SANDBOX_ERROR;
                failed(&message)
            }
        };
        if args.unordered {
            print_line(&with_line(n, &result));
            continue;
        }
        results[i] = Some(result);
        held += 1;
        while let Some(r) = results.get_mut(printed).and_then(Option::take) {
            print_line(&r);
            printed += 1;
            held -= 1;
        }
    }
    if worst == 0 { 0 } else { 1 }
}

/// How a batch's worker ended: its output, or why there is none.
type WorkerEnd = Result<std::process::Output, String>;

/// A batch worker's end, sent to the batch exactly once: by [`Reply::send`], or, if the
/// thread watching the worker ends without sending (a panic), by the drop, which says so.
struct Reply {
    tx: std::sync::mpsc::Sender<(usize, WorkerEnd)>,
    at: usize,
    n: usize,
    sent: bool,
}

impl Reply {
    fn send(mut self, end: WorkerEnd) {
        self.sent = true;
        let _ = self.tx.send((self.at, end));
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.sent {
            let _ = self.tx.send((
                self.at,
                Err(format!(
                    "the batch lost the worker for line {}: the thread watching it ended without its result",
                    self.n
                )),
            ));
        }
    }
}

/// One line on stdout, whole: the batch's threads print under stdout's lock.
fn print_line(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// A JSON object of the batch's line `n` (from 1), as `--unordered` prints it: `line` first.
fn with_line(n: usize, object: &str) -> String {
    tagged(&line_tag(n, None), object)
}

/// The keys an unordered batch puts first in an object of its line `n`: `line`, and the
/// request's `id` when given (output pieces, whose worker does not know it).
fn line_tag(n: usize, id: Option<serde_json::Value>) -> String {
    match id {
        Some(id) => format!("\"line\":{n},\"id\":{id}"),
        None => format!("\"line\":{n}"),
    }
}

/// The JSON object `object` with the keys `tag` (JSON text: `"line":3`) first.
fn tagged(tag: &str, object: &str) -> String {
    match object.strip_prefix('{') {
        Some(rest) => {
            let sep = if rest.trim_start().starts_with('}') {
                ""
            } else {
                ","
            };
            format!("{{{tag}{sep}{rest}")
        }
        None => object.to_string(),
    }
}

/// `--requests --unordered --stream`: prints each output line a worker prints (`{"stdout":
/// ...}`, `{"stderr": ...}`, as the supervisor writes them) as it comes, with the keys `tag`
/// first ([`line_tag`]), and returns the rest, the result, as the worker's output for the
/// batch to print (or to find missing) as without --stream.
fn pass_on_events(
    mut child: std::process::Child,
    tag: &str,
) -> std::io::Result<std::process::Output> {
    let mut last = Vec::new();
    if let Some(out) = child.stdout.take() {
        let mut out = std::io::BufReader::new(out);
        let mut line = Vec::new();
        loop {
            line.clear();
            match out.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) if is_piece(&line) => {
                    print_line(&tagged(tag, String::from_utf8_lossy(&line).trim_end()));
                }
                Ok(_) => last.extend_from_slice(&line),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            }
        }
    }
    let status = child.wait()?;
    Ok(std::process::Output {
        status,
        stdout: last,
        stderr: Vec::new(),
    })
}

/// Whether a line a `--stream` worker wrote is a piece of output (the program's, or its
/// compile's or install's), not its result.
fn is_piece(line: &[u8]) -> bool {
    [
        &br#"{"stdout":"#[..],
        br#"{"stderr":"#,
        br#"{"compile":{"#,
        br#"{"dependencies":{"#,
    ]
    .iter()
    .any(|p| line.starts_with(p))
}

/// `v` as one line of JSON (no newline at its end).
fn json_line(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| {
        format!(
            r#"{{"success":false,"status":"sandbox_error","exitCode":null,"message":"cannot encode the result: {}","errorKind":"setup","cliExitCode":125}}"#,
            e.to_string().replace(['"', '\\'], "'")
        )
    })
}

/// A batch worker's stdout as the batch's line for it: the one JSON value it printed, as it
/// is (keys in the worker's order, the result's: `success` first; a result of 10 MiB is not
/// parsed into a tree and printed again), or None when it printed no JSON value. A value
/// over several lines (which a worker does not print) is put on one.
fn worker_line(stdout: &[u8]) -> Option<String> {
    use serde::de::IgnoredAny;
    serde_json::from_slice::<IgnoredAny>(stdout).ok()?;
    // Valid JSON is UTF-8.
    let text = std::str::from_utf8(stdout).ok()?.trim();
    if !text.contains('\n') {
        return Some(text.to_string());
    }
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .map(|v| json_line(&v))
}

/// `cordon profiles`.
pub fn profiles(json: bool, extra: &[PathBuf]) -> i32 {
    let all = match crate::profile::all(extra) {
        Ok(a) => a,
        Err(e) => return fail(e, ErrorKind::Setup, json),
    };
    let mut rows = Vec::new();
    for p in all.values() {
        let rootfs = crate::run::resolve_rootfs(p, None);
        let version = p.version.as_ref().map(|argv| {
            let mut s = crate::SandboxSpec::new(argv.clone());
            s.rootfs = rootfs.clone();
            // The version comes from the compiler of a compiled language, else the
            // interpreter, found and run as `cordon run` finds and runs it.
            let env = if p.is_compiled() {
                &p.compile_env
            } else {
                &p.env
            };
            s.env = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            s.command_path = Some(crate::run::profile_path(env));
            s.stdin = StdinSource::Null;
            s.limits.wall = std::time::Duration::from_secs(20);
            s.limits.memory = Some(1 << 30);
            s.limits.pids = Some(256);
            match crate::run_spec(&s) {
                Ok(o) if o.success => {
                    let text = if o.output.trim().is_empty() {
                        o.error
                    } else {
                        o.output
                    };
                    text.lines().next().unwrap_or("").trim().to_string()
                }
                Ok(o) => format!(
                    "unavailable ({}: {})",
                    o.status.as_str(),
                    o.message.unwrap_or(o.error).trim()
                ),
                Err(e) => format!("unavailable ({e})"),
            }
        });
        rows.push(serde_json::json!({
            "language": p.name,
            "description": p.description,
            "compiled": p.is_compiled(),
            "version": version,
            "rootfs": match &rootfs { Rootfs::Host => "host".to_string(), Rootfs::Dir(d) => d.display().to_string() },
        }));
    }
    if json {
        return print_json(&rows, true);
    }
    println!(
        "{:<8} {:<9} {:<40} ROOTFS",
        "LANGUAGE", "COMPILED", "VERSION"
    );
    for r in &rows {
        println!(
            "{:<8} {:<9} {:<40} {}",
            r["language"].as_str().unwrap_or(""),
            if r["compiled"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            },
            r["version"].as_str().unwrap_or("-"),
            r["rootfs"].as_str().unwrap_or("")
        );
    }
    0
}

/// `cordon history`.
pub fn history(last: usize, json: bool) -> i32 {
    let records = match crate::history::History::open_default().and_then(|h| h.last(last)) {
        Ok(r) => r,
        Err(e) => return fail(e, ErrorKind::Setup, json),
    };
    if json {
        for r in &records {
            if print_json(r, false) != 0 {
                return exit_codes::SANDBOX_ERROR;
            }
        }
        return 0;
    }
    println!(
        "{:<24} {:<8} {:<14} {:>7} {:>10} {:>10} {:>8}  ID",
        "ENDED", "LANGUAGE", "STATUS", "EXIT", "WALL ms", "CPU ms", "MEM MiB"
    );
    for r in &records {
        // The program's exit code, or the signal that ended it; `-` when neither is known.
        let exit = match (&r.signal, r.exit_code) {
            (Some(s), _) => s.clone(),
            (None, Some(c)) => c.to_string(),
            (None, None) => "-".into(),
        };
        println!(
            "{:<24} {:<8} {:<14} {:>7} {:>10.1} {:>10} {:>8}  {}",
            r.timestamp,
            r.language,
            r.status,
            exit,
            r.execution_time,
            r.cpu_time
                .map(|c| format!("{c:.1}"))
                .unwrap_or_else(|| "-".into()),
            r.memory_used
                .map(|m| format!("{:.1}", m as f64 / 1048576.0))
                .unwrap_or_else(|| "-".into()),
            r.execution_id
        );
    }
    0
}

/// `cordon rootfs build LANG`.
pub fn rootfs_build(lang: &str) -> i32 {
    let lang = crate::profile::find(lang, &[])
        .map(|p| p.name)
        .unwrap_or_else(|_| lang.to_string());
    match crate::rootfs::build(&lang, true) {
        Ok(b) => {
            println!(
                "built {} rootfs at {} ({})",
                b.language,
                b.path.display(),
                b.toolchain
                    .as_deref()
                    .unwrap_or("toolchain version unknown")
            );
            0
        }
        Err(e) => fail(e, ErrorKind::Setup, false),
    }
}

/// `cordon rootfs list`.
pub fn rootfs_list(json: bool) -> i32 {
    let built = crate::rootfs::list();
    if json {
        return print_json(&built, true);
    }
    if built.is_empty() {
        println!(
            "no root filesystem built yet in {}; build one with `cordon rootfs build LANG`",
            crate::rootfs::data_dir().display()
        );
        return 0;
    }
    println!(
        "{:<8} {:<40} {:<26} {:>9}  PATH",
        "LANGUAGE", "TOOLCHAIN", "BUILT", "SIZE MiB"
    );
    for b in &built {
        println!(
            "{:<8} {:<40} {:<26} {:>9}  {}",
            b.language,
            b.toolchain.as_deref().unwrap_or("-"),
            b.built.as_deref().unwrap_or("-"),
            b.size_bytes
                .map(|s| format!("{:.0}", s as f64 / 1048576.0))
                .unwrap_or_else(|| "-".into()),
            b.path.display()
        );
    }
    0
}

/// `text` with its control characters escaped as Rust escapes them (`\n`, `\u{1b}`), for
/// cordon's own lines on a terminal that quote what the program chose (a file name, also
/// inside a delivery error): such a name could otherwise forge a line of cordon's or send
/// the terminal escape sequences (OSC 52 writes the clipboard). The program's own output
/// passes through as it is.
pub fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_in_quoted_names_are_escaped() {
        let name = "\r\x1b[2Kcordon: ok\x1b]52;c;aGk=\x07\nx";
        assert_eq!(
            super::escape_controls(name),
            "\\r\\u{1b}[2Kcordon: ok\\u{1b}]52;c;aGk=\\u{7}\\nx"
        );
        assert_eq!(super::escape_controls("plain é"), "plain é");
    }

    #[test]
    fn a_usage_error_becomes_one_line_with_its_list_after_the_colon() {
        let rendered = "error: the following required arguments were not provided:\n  --output-dir <DIR>\n  <CMD>...\n\nUsage: cordon exec --output-dir <DIR> <CMD>...\n\nFor more information, try '--help'.\n";
        assert_eq!(
            super::usage_message(rendered),
            "the following required arguments were not provided: --output-dir <DIR>, <CMD>..."
        );
        let rendered = "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a value, use '-- --bogus'\n\nUsage: cordon exec [OPTIONS] <CMD>...\n";
        assert_eq!(
            super::usage_message(rendered),
            "unexpected argument '--bogus' found; tip: to pass '--bogus' as a value, use '-- --bogus'"
        );
    }
}

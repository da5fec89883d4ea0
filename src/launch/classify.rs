//! Turning what the supervisor saw into the result object: the status class, the exit code
//! the CLI uses, and a sentence for anything that is not a plain exit. Pure: unit-tested.

use super::channel::Msg;
use super::supervise::{Ended, Grace};
use crate::limits::CgroupMetrics;
use crate::outcome::{
    Enforcement, IsolationReport, LimitsReport, MetricSource, OmittedFile, Outcome, Status,
    exit_codes, signal_name, split_char_len,
};
use crate::spec::{LimitNaming, SandboxSpec};
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;

/// What runtimes print when an allocation fails at an address-space (rlimit) limit, as the
/// whole phrase they use (a bare "cannot allocate" or "failed to allocate" is in ordinary
/// error messages too). Used only when memory is limited by RLIMIT_DATA, only on the start
/// and the end of stderr (a runtime's last words, or the head of its crash dump: Go's
/// goroutine dump follows its message), and the status then says `inferred`.
const OOM_MARKERS: &[&str] = &[
    "cannot allocate memory",        // glibc strerror(ENOMEM)
    "runtime: out of memory",        // Go
    "javascript heap out of memory", // V8 (Node.js)
    "allocation failed",             // V8's "Allocation failed - process out of memory", Buffers
    "std::bad_alloc",                // C++
    "out of memory",                 // many C programs, Ruby's NoMemoryError
];

/// How much of the start and of the end of stderr is read for [`OOM_MARKERS`].
const OOM_SPAN: usize = 8192;

/// Whether the end of stderr reads like an allocation failure (case-insensitive): a marker
/// phrase, Python's `MemoryError` ending a traceback (a line of its own or `MemoryError: ...`),
/// Rust's `memory allocation of N bytes failed`, or bash's `xmalloc: ...: cannot allocate N
/// bytes`.
fn looks_like_oom(stderr: &str) -> bool {
    let (mut head, mut tail) = (
        OOM_SPAN.min(stderr.len()),
        stderr.len().saturating_sub(OOM_SPAN),
    );
    while !stderr.is_char_boundary(head) {
        head -= 1;
    }
    while !stderr.is_char_boundary(tail) {
        tail += 1;
    }
    let lower = if tail <= head {
        stderr.to_ascii_lowercase()
    } else {
        format!("{}\n{}", &stderr[..head], &stderr[tail..]).to_ascii_lowercase()
    };
    if OOM_MARKERS.iter().any(|m| lower.contains(m)) {
        return true;
    }
    let bytes_phrase = |line: &str, head: &str, tail: &str| {
        line.split(head).skip(1).any(|rest| {
            let digits = rest.trim_start().split(' ').next().unwrap_or("");
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && rest.trim_start()[digits.len()..].starts_with(tail)
        })
    };
    lower.lines().any(|l| {
        let l = l.trim();
        l == "memoryerror"
            || l.starts_with("memoryerror:")
            || bytes_phrase(l, "memory allocation of", " bytes failed")
            || bytes_phrase(l, "cannot allocate", " bytes")
    })
}

fn human_size(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 {
        format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
    } else {
        format!("{b} bytes")
    }
}

/// Adds `note` to the result's message, after `; `. The first note of a run that succeeded
/// (`ok`) starts by saying so, so that it is not read as the run's failure.
fn add_note(message: &mut Option<String>, ok: bool, note: String) {
    *message = Some(match message.take() {
        Some(m) => format!("{m}; {note}"),
        None if ok => format!("the program exited with code 0, but {note}"),
        None => note,
    });
}

/// Notes for the limits a failed program's stderr shows it met as an errno's words (each
/// language's runtime prints the C library's text, or the errno's name): EFBIG at
/// `--file-size`, EMFILE at `--open-files`, and a name lookup or connection that failed
/// because the network is off.
fn errno_notes(stderr: &str, spec: &SandboxSpec) -> Vec<String> {
    let tail = Tail::of(stderr);
    let says = |phrases: &[&str], errnos: &[&str]| tail.says(phrases, errnos);
    let raise = |key: &str| spec.limit_naming.raise(key);
    let mut notes = Vec::new();
    if let Some(max) = spec.limits.file_size
        && says(&["file too large"], &["EFBIG"])
    {
        notes.push(format!(
            "the program reports a file too large (EFBIG): writes past the file size limit of {} fail so (raise it with {})",
            human_size(max),
            raise("file_size")
        ));
    }
    if says(&["too many open files"], &["EMFILE"]) {
        notes.push(format!(
            "the program reports too many open files (EMFILE): each process may hold {} descriptors (raise it with {})",
            spec.limits.open_files,
            raise("open_files")
        ));
    }
    let offline = matches!(spec.network, crate::net::Network::None);
    if offline
        && says(
            &[
                "name resolution",
                "could not resolve host",
                "name or service not known",
                "no such host",
                "network is unreachable",
            ],
            &["EAI_AGAIN", "ENOTFOUND", "ENETUNREACH"],
        )
    {
        let what = "the program reports a failed name lookup or unreachable network";
        notes.push(offline_note(what, spec.limit_naming));
    } else if offline
        // Landlock refuses TCP only from its network ABI on; before, a failed connect is the
        // namespace's (unreachable, said above) or nobody listening.
        && crate::sys::landlock_abi().is_ok_and(|abi| abi >= crate::security::landlock::NET_ABI)
        && (says(&["couldn't connect to server"], &[])
            || tail.says_near(
                "permission denied",
                &["connect(", "create_connection(", "bind(", "listen("],
            ))
    {
        let what = "the program reports a refused connection or listening socket: Landlock refuses TCP connect and bind in the sandbox, on its loopback too (a local server cannot listen on TCP; a unix socket in /tmp works)";
        notes.push(offline_note(what, spec.limit_naming));
    }
    if let Some(note) = host_file_note(&tail, spec) {
        notes.push(note);
    }
    notes
}

/// What a program that met the absent network is told, by where its limits come from.
fn offline_note(what: &str, naming: LimitNaming) -> String {
    match naming {
        // A compile never has the network: what it needs must come with the code.
        LimitNaming::CompileFlags | LimitNaming::CompileRequest => format!(
            "{what}: a compile runs without network, so it cannot fetch modules or crates; send their sources with the code (vendored), or use a root filesystem that has them"
        ),
        LimitNaming::Request => format!(
            r#"{what}: the sandbox has no network (the default); to reach given hosts through cordon's filtering proxy, set config.network "allow=HOST[,HOST...]""#
        ),
        _ => format!(
            "{what}: the sandbox has no network (the default); to reach given hosts through cordon's filtering proxy, pass --net allow=HOST[,HOST...]"
        ),
    }
}

/// `cordon exec -- python3 main.py` run beside main.py: the program says it has no such file,
/// and one of the command's arguments names a file in cordon's working directory on the host,
/// which the sandbox's /workspace does not have (it starts with the --file inputs alone).
/// Only for `cordon exec`, whose command is the caller's own (`cordon run` copies its code in).
fn host_file_note(tail: &Tail, spec: &SandboxSpec) -> Option<String> {
    let exec = spec.command_path.is_none()
        && spec.container.is_none()
        && spec.limit_naming == LimitNaming::Flags;
    let missing = tail.says(
        &[
            "no such file or directory",
            "can't open file",
            "cannot find module",
        ],
        &["ENOENT"],
    );
    if !exec || !missing {
        return None;
    }
    let file = spec.argv.iter().skip(1).find_map(|arg| {
        let name = arg.strip_prefix("./").unwrap_or(arg);
        let plain = !name.is_empty()
            && !name.starts_with(['/', '-'])
            && !std::path::Path::new(name)
                .components()
                .any(|c| c == std::path::Component::ParentDir);
        (plain
            && tail.text.contains(name)
            && !spec.files.iter().any(|f| f.path == name)
            && std::path::Path::new(name).is_file())
        .then_some(name)
    })?;
    Some(format!(
        "`{file}` is a file in cordon's working directory on the host, not in the sandbox, whose /workspace starts with only what --file copies in: add `--file {file}={file}` (or run it with `cordon run {file}`)"
    ))
}

/// The last 64 KiB of a program's stderr, where a failing program's last words are (no copy
/// of a large stderr), for the words it printed.
struct Tail<'a> {
    text: &'a str,
    lower: String,
}

impl<'a> Tail<'a> {
    fn of(stderr: &'a str) -> Tail<'a> {
        let mut start = stderr.len().saturating_sub(64 << 10);
        while !stderr.is_char_boundary(start) {
            start += 1;
        }
        let text = &stderr[start..];
        Tail {
            text,
            lower: text.to_ascii_lowercase(),
        }
    }

    /// Whether a line with `phrase` (lower case) has one of `near` on it or on one of the two
    /// lines above (a traceback's call, above its error).
    fn says_near(&self, phrase: &str, near: &[&str]) -> bool {
        let lines: Vec<&str> = self.lower.lines().collect();
        lines.iter().enumerate().any(|(i, line)| {
            line.contains(phrase)
                && lines[i.saturating_sub(2)..=i]
                    .iter()
                    .any(|l| near.iter().any(|n| l.contains(n)))
        })
    }

    /// Whether it has one of `phrases` (lower case, matched in any case) or one of `errnos`
    /// as printed (`EFBIG`), as a whole word (not `ENOTFOUND` in "ModuleNotFoundError").
    fn says(&self, phrases: &[&str], errnos: &[&str]) -> bool {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let text = self.text;
        phrases.iter().any(|p| self.lower.contains(p))
            || errnos.iter().any(|e| {
                text.match_indices(e).any(|(i, _)| {
                    !text[..i].ends_with(word) && !text[i + e.len()..].starts_with(word)
                })
            })
    }

    /// Whether the program reports a process or thread it could not start: a shell's,
    /// Python's, Node.js's, Go's or the C library's words for a refused fork, clone or
    /// thread.
    fn says_spawn_failed(&self) -> bool {
        let phrases = [
            "cannot fork",
            "can't fork",
            "fork: retry",
            "fork failed",
            "unable to fork",
            "could not fork",
            "can't start new thread",
            "failed to create new os thread",
            "pthread_create failed",
            "thread creation failed",
        ];
        if self.says(&phrases, &[]) {
            return true;
        }
        // EAGAIN is also any non-blocking read's or lock's: only with a fork or a spawn in
        // the same line or the two above (Node.js: "spawn sleep EAGAIN"; Python: its
        // traceback's "os.fork()", and the carets under it, above "BlockingIOError: [Errno
        // 11]").
        let lines: Vec<&str> = self.lower.lines().collect();
        let near = |l: &&str| l.contains("fork") || l.contains("spawn") || l.contains("popen");
        lines.iter().enumerate().any(|(i, line)| {
            (line.contains("eagain") || line.contains("[errno 11]"))
                && lines[i.saturating_sub(2)..=i].iter().any(near)
        })
    }
}

/// Notes for a run that failed or timed out beside a limit that counts nothing of its own
/// under the rlimit backend: the memory watch's refused request (RLIMIT_DATA counts each
/// private writable mapping in full when it is made: a thread's stack, a runtime's reserved
/// heap), and `--pids` under RLIMIT_NPROC, which counts no refusals (the watch's samples
/// saw the sandbox at the limit, or the program's words say a fork or thread failed).
fn uncounted_limit_notes(
    spec: &SandboxSpec,
    watch: Option<&super::memwatch::WatchReport>,
    pids_hits: Option<u64>,
    stderr: &str,
    pids_only: bool,
) -> Vec<String> {
    let raise = |key: &str| spec.limit_naming.raise(key);
    let mut notes = Vec::new();
    let refused = watch.and_then(|w| w.refused_request);
    if let (Some(n), Some(limit), false) = (refused, spec.limits.memory, pids_only) {
        notes.push(format!(
            "the memory limit of {} refused a request for {} more (without a cgroup, RLIMIT_DATA counts each process's private writable mappings in full when they are made, touched or not: each thread's stack, 8 MiB by default, and a runtime's reserved heap): if the program failed or stalled after that, it needed more (raise it with {}, or give cordon a cgroup: see `cordon doctor`)",
            human_size(limit),
            human_size(n),
            raise("memory")
        ));
    }
    if let (Some(max), None) = (spec.limits.pids, pids_hits) {
        // A program that succeeded is told only what its own stderr shows: one that merely
        // ran as many threads as allowed did nothing wrong.
        let seen = !pids_only && watch.is_some_and(|w| w.tasks_peak.saturating_add(1) >= max);
        if seen || (refused.is_none() && Tail::of(stderr).says_spawn_failed()) {
            let how = if seen {
                "the memory watch's samples saw the sandbox at its limit of processes and threads, so a fork or thread it tried may have failed"
            } else if pids_only {
                // After "the program exited with code 0, but".
                "its stderr reports a fork or thread it could not start"
            } else {
                "the program reports a fork or thread it could not start"
            };
            notes.push(format!(
                "{how}: without a cgroup, RLIMIT_NPROC holds the sandbox to {max} processes and threads, its init among them, and counts no refusals (raise it with {})",
                raise("pids")
            ));
        }
    }
    notes
}

/// What a signal that ended the program (with no limit behind it) says, as a shell says it;
/// none for SIGPIPE, which a shell does not report either (its reader went away: `| head`).
fn signal_message(signal: i32) -> Option<String> {
    let what = match signal {
        libc::SIGPIPE => return None,
        libc::SIGSEGV => "segmentation fault: an invalid memory access",
        libc::SIGBUS => "bus error: an access to memory that is not there",
        libc::SIGABRT => "aborted (abort(), a failed assertion, a runtime's fatal error)",
        libc::SIGFPE => "arithmetic exception (an integer division by zero)",
        libc::SIGILL => "illegal instruction",
        libc::SIGTRAP => "trace or breakpoint trap",
        // cordon's own SIGKILLs (timeout, memory, output) carry their own status.
        libc::SIGKILL => {
            "not sent by cordon, as no limit was reached (the program, another of its processes, or something on the host sent it)"
        }
        _ => "",
    };
    let name = Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_string());
    Some(if what.is_empty() {
        format!("the program was killed by {name}")
    } else {
        format!("the program was killed by {name}: {what}")
    })
}

/// How the sandbox's init ended, for a note on work it had not finished (collection, the
/// export copy); `counted` says what counts toward the memory limit and how to raise it.
fn init_end(
    ended: &super::supervise::Ended,
    oom_reported: Option<bool>,
    lim: &crate::spec::Limits,
    counted: &str,
) -> String {
    match ended.init_status {
        Some(WaitStatus::Signaled(_, Signal::SIGKILL, _)) if oom_reported == Some(true) => {
            format!(
                "the kernel OOM-killed the sandbox's init at the memory limit of {} ({counted})",
                lim.memory.map(human_size).unwrap_or_else(|| "?".into())
            )
        }
        Some(WaitStatus::Signaled(_, sig, _)) => {
            format!("the sandbox's init was killed by {}", sig.as_str())
        }
        Some(WaitStatus::Exited(_, c)) => format!("the sandbox's init exited with code {c}"),
        // Not reaped: supervision ended another way (cordon's own failure, said in the
        // message before this note).
        _ => "the sandbox's init did not report its end".into(),
    }
}

/// What to do when the sandbox's init ended without saying why: for a signal, where it can
/// have come from.
fn unreported_end(status: Option<WaitStatus>) -> &'static str {
    match status {
        Some(WaitStatus::Signaled(..)) => {
            "; run `cordon doctor`. A signal init did not send itself came from outside the sandbox: SIGSYS from a seccomp filter on cordon's own process, SIGKILL from the OOM killer or another process; the kernel's log (`dmesg`) may say which"
        }
        _ => "; run `cordon doctor`, and report it as a bug in cordon if the host passes",
    }
}

/// The text of a captured output, whether it replaced bytes that were not UTF-8, and the
/// exact bytes when the text is not them and `keep_exact` asks for them (a base64 result).
/// Without a second copy when the bytes are valid UTF-8 (an output of 10 MiB must not cost
/// cordon several times that); invalid sequences become U+FFFD. `cut`: the stream was cut at
/// the output limit; a character the cut split (the bytes kept end with the first bytes of a
/// multi-byte character, see [`split_char_len`]) is then left out of the text whole: it is
/// the cut's doing, not a fault in the program's output, so it is neither replaced nor lossy.
fn into_text(mut bytes: Vec<u8>, keep_exact: bool, cut: bool) -> (String, bool, Option<Vec<u8>>) {
    let split = if cut { split_char_len(&bytes) } else { 0 };
    let exact = (keep_exact && split > 0).then(|| bytes.clone());
    bytes.truncate(bytes.len() - split);
    match String::from_utf8(bytes) {
        Ok(s) => (s, false, exact),
        Err(e) => {
            let bytes = e.into_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            (text, true, keep_exact.then(|| exact.unwrap_or(bytes)))
        }
    }
}

pub fn outcome(
    spec: &SandboxSpec,
    mut ended: Ended,
    metrics: CgroupMetrics,
    limits: LimitsReport,
    mut isolation: IsolationReport,
) -> Outcome {
    // What the caller changes to raise a limit: a flag, or a request's field.
    let raise = |key: &str| spec.limit_naming.raise(key);
    let mut setup_failure = None;
    let mut payload: Option<Msg> = None;
    let mut collected = std::mem::take(&mut ended.collected);
    for m in &ended.msgs {
        match m {
            Msg::Landlock { status, abi } => {
                isolation.landlock = status.clone();
                isolation.landlock_abi = *abi;
            }
            Msg::HostViews { status } => isolation.host_views = status.clone(),
            Msg::SetupFailed { .. } if setup_failure.is_none() => setup_failure = Some(m.clone()),
            Msg::Exited { .. } | Msg::Signaled { .. } => payload = Some(m.clone()),
            _ => {}
        }
    }
    // The payload reports Landlock's outcome just before its seccomp filter and execve, and
    // init its end.
    let program_started =
        payload.is_some() || ended.msgs.iter().any(|m| matches!(m, Msg::Landlock { .. }));
    let memory_by_rlimit = limits
        .memory_bytes
        .as_ref()
        .is_some_and(|l| l.enforcement == Enforcement::Rlimit);
    let cgroup_source = metrics.source.unwrap_or(MetricSource::Unavailable);
    let oom_reported = metrics.oom_kills.map(|n| n > 0);
    let (stderr_text, stderr_lossy, stderr_exact) = into_text(
        std::mem::take(&mut ended.stderr.data),
        spec.exact_output,
        ended.stderr.truncated,
    );
    let lim = &spec.limits;
    // RLIMIT_CPU kills with SIGKILL a second after SIGXCPU: a SIGKILL with the CPU time used up
    // is the CPU-time limit.
    let cpu_used = metrics.cpu_time.or(ended.rusage_cpu);
    let cpu_exhausted = matches!((lim.cpu_time, cpu_used), (Some(l), Some(u)) if u >= l);
    let cpu_mostly_used =
        matches!((lim.cpu_time, cpu_used), (Some(l), Some(u)) if u.mul_f64(1.25) >= l);

    let (mut status, mut code, mut signal, mut message): (
        Status,
        i32,
        Option<i32>,
        Option<String>,
    ) = (Status::SandboxError, exit_codes::SANDBOX_ERROR, None, None);
    let mut exit_code = None;
    let mut oom_inferred = false;
    let watch = ended.memory_watch.clone();
    // What says that an allocation failure the program reports under RLIMIT_DATA was the
    // memory limit, beside its own words (which any program may print): a request the watch
    // saw the limit refuse, or a process (ru_maxrss) or the sandbox (the watch's samples)
    // grown to half the limit or more. None: no such evidence; the failure is the program's.
    let limit_met: Option<String> = lim.memory.and_then(|limit| {
        if let Some(n) = watch.as_ref().and_then(|w| w.refused_request) {
            return Some(format!("a request for {} more was over it", human_size(n)));
        }
        let rss = ended.rusage_maxrss.unwrap_or(0);
        let sampled = watch.as_ref().map_or(0, |w| w.peak);
        // ru_maxrss is a process's resident size, shared libraries and mapped files
        // included, which the limit (RLIMIT_DATA, private memory) does not count: above the
        // limit it would read as a limit that did not hold, so it is said for what it is.
        if sampled.max(rss).saturating_mul(2) < limit {
            return None;
        }
        Some(if sampled >= rss {
            format!("memory had grown to {}", human_size(sampled))
        } else {
            format!(
                "a process had reached {} resident, counting shared libraries and mapped files, which the limit leaves out",
                human_size(rss)
            )
        })
    });
    let watch_over = watch.as_ref().is_some_and(|w| w.over);
    let watch_error = watch.as_ref().and_then(|w| w.error.as_ref());
    if let Some(e) = &ended.internal_error {
        message = Some(e.clone());
    } else if let Some(sig) = ended.interrupted {
        status = Status::Killed;
        code = 128 + sig as i32;
        message = Some(format!(
            "cordon received {} and killed the sandbox",
            sig.as_str()
        ));
    } else if ended.timed_out {
        status = Status::Timeout;
        code = exit_codes::TIMEOUT;
        message = Some(format!(
            "the wall-clock limit of {:?} was reached; cordon killed every process of the sandbox (raise it with {})",
            lim.wall,
            raise("timeout")
        ));
        // Little CPU used, and its stdin open with nothing to read: a prompt waiting for
        // input, which more time would not have ended.
        if ended.stdin_starved
            && cpu_used.is_some_and(|c| c.as_secs_f64() < 0.1 * ended.wall.as_secs_f64())
        {
            add_note(
                &mut message,
                false,
                format!(
                    "it used little CPU ({} ms), and its stdin was an open pipe with nothing in it: if it was waiting for input, give all of it with --stdin FILE (or a request's `stdin`), or close stdin (`< /dev/null`)",
                    cpu_used.unwrap_or_default().as_millis()
                ),
            );
        }
    } else if ended.output_limited {
        status = Status::OutputLimit;
        code = exit_codes::KILLED;
        let which = if ended.stdout.truncated {
            "stdout"
        } else {
            "stderr"
        };
        message = Some(format!(
            "{which} exceeded the output limit of {}; cordon kept the first {} and killed the sandbox (raise it with {})",
            human_size(lim.output),
            human_size(lim.output),
            raise("output_limit")
        ));
    } else if let Some(Msg::SetupFailed {
        step,
        message: m,
        exit_code: c,
    }) = &setup_failure
    {
        code = *c;
        message = Some(if *c == exit_codes::SANDBOX_ERROR {
            format!("sandbox setup failed: cannot {step}: {m}")
        } else {
            m.clone()
        });
        // A command that is not there or cannot run (126, 127) is the caller's to fix, not
        // cordon failing: its code is the exit code a shell gives it.
        if matches!(*c, exit_codes::NOT_FOUND | exit_codes::CANNOT_EXECUTE) {
            status = Status::RuntimeError;
            exit_code = Some(*c);
        }
    } else if !program_started
        // A limit can end the run before the program starts (init writes the input files
        // inside the sandbox's limits): the branches below name it.
        && oom_reported != Some(true)
        && !watch_over
        && !ended.cpu_timed_out
        && match ended.init_status {
            // cordon's own kill after a memory watch failure: that failure is the reason.
            Some(WaitStatus::Signaled(_, Signal::SIGKILL, _)) => watch_error.is_none(),
            Some(WaitStatus::Signaled(..) | WaitStatus::Exited(_, 1..)) => true,
            _ => false,
        }
    {
        // init died before the program could start, saying nothing: whatever else failed
        // then (such as the memory watch's hand-over) failed because of that.
        message = Some(format!(
            "{} before the program started, and reported no reason{}",
            init_end(&ended, oom_reported, lim, ""),
            unreported_end(ended.init_status)
        ));
    } else if let Some(e) = watch_error {
        message = Some(format!(
            "{e}; cordon killed the sandbox rather than run it without its memory limit (a cgroup bounds memory without polling: see `cordon doctor`)"
        ));
    } else if let Some(w) = watch.as_ref().filter(|w| w.over) {
        status = Status::MemoryLimit;
        code = exit_codes::KILLED;
        if let Some(Msg::Signaled { signal: s }) = payload {
            signal = Some(s);
        }
        let sockets = match w.socket_peak {
            0 => String::new(),
            b => format!("; up to {} of it queued on sockets", human_size(b)),
        };
        message = Some(format!(
            "the memory limit of {} was exceeded: cordon's memory watch saw {} in the sandbox (its processes' private and shared memory, its tmpfs files, pipes, socket buffers{sockets} and kernel buffers) and killed it (no cgroup here: memory is polled every {}-{} ms); raise it with {}",
            lim.memory.map(human_size).unwrap_or_else(|| "?".into()),
            human_size(w.peak),
            super::memwatch::FIRST_INTERVAL.as_millis(),
            super::memwatch::LATER_INTERVAL.as_millis(),
            raise("memory")
        ));
    } else {
        match payload {
            Some(Msg::Exited { code: c }) => {
                exit_code = Some(c);
                code = c;
                status = if c == 0 {
                    Status::Ok
                } else {
                    Status::RuntimeError
                };
                if c != 0 && oom_reported == Some(true) {
                    status = Status::MemoryLimit;
                    code = exit_codes::KILLED;
                } else if c != 0
                    && memory_by_rlimit
                    && limit_met.is_some()
                    && looks_like_oom(&stderr_text)
                {
                    status = Status::MemoryLimit;
                    oom_inferred = true;
                    code = exit_codes::KILLED;
                }
            }
            Some(Msg::Signaled { signal: s }) => {
                signal = Some(s);
                code = 128 + s;
                status = Status::Signaled;
                if oom_reported == Some(true) {
                    status = Status::MemoryLimit;
                } else if s == libc::SIGSYS {
                    message = Some(
                        "killed by SIGSYS: the seccomp policy kills system calls made through another ABI (i386 `int 0x80`, x32); build the program for x86_64".into(),
                    );
                } else if s == libc::SIGXFSZ
                    && let Some(max) = lim.file_size
                {
                    // The signal RLIMIT_FSIZE sends on a write past it (a program that
                    // ignores it gets EFBIG instead, and says so itself).
                    message = Some(format!(
                        "killed by SIGXFSZ: a write went past the file size limit of {} (raise it with {})",
                        human_size(max),
                        raise("file_size")
                    ));
                } else if ended.cpu_timed_out
                    // RLIMIT_CPU's SIGXCPU, only with that limit set and most of it used (the
                    // counters cordon reads run up to 15% behind the process's own clock,
                    // which RLIMIT_CPU reads), so a program signalling itself is not a
                    // timeout; or its SIGKILL a second later, with the CPU time used up.
                    || (s == libc::SIGXCPU && cpu_mostly_used)
                    || (s == libc::SIGKILL && cpu_exhausted)
                {
                    status = Status::Timeout;
                    code = exit_codes::TIMEOUT;
                } else if memory_by_rlimit
                    && (s == libc::SIGSEGV || s == libc::SIGABRT || s == libc::SIGBUS)
                    && limit_met.is_some()
                    && looks_like_oom(&stderr_text)
                {
                    status = Status::MemoryLimit;
                    oom_inferred = true;
                }
                if status == Status::MemoryLimit {
                    code = exit_codes::KILLED;
                }
                if status == Status::Signaled && message.is_none() {
                    message = signal_message(s);
                }
            }
            _ if ended.cpu_timed_out => {
                status = Status::Timeout;
                code = exit_codes::TIMEOUT;
            }
            _ if oom_reported == Some(true) => {
                status = Status::MemoryLimit;
                code = exit_codes::KILLED;
            }
            _ => {
                message = Some(format!(
                    "{} without reporting the program's exit{}",
                    init_end(&ended, oom_reported, lim, ""),
                    unreported_end(ended.init_status)
                ));
            }
        }
        if ended.cpu_timed_out && status != Status::Ok {
            status = Status::Timeout;
            code = exit_codes::TIMEOUT;
        }
        message = message.or_else(|| match status {
            Status::MemoryLimit => Some(format!(
                "the memory limit of {} was reached ({}); raise it with {}",
                lim.memory.map(human_size).unwrap_or_else(|| "?".into()),
                match (oom_inferred, &limit_met) {
                    (true, Some(evidence)) => format!(
                        "inferred from the program's allocation failure under RLIMIT_DATA: {evidence}"
                    ),
                    _ => "OOM kill reported by the kernel".to_string(),
                },
                raise("memory")
            )),
            Status::Timeout => Some(format!(
                "the CPU-time limit of {:?} was reached{} (raise it with {})",
                lim.cpu_time.unwrap_or_default(),
                // RLIMIT_CPU counts whole seconds, each process on its own.
                if limits
                    .cpu_time_ms
                    .as_ref()
                    .is_some_and(|l| l.enforcement == Enforcement::Rlimit)
                {
                    format!(
                        "; without a cgroup it is RLIMIT_CPU, which counts whole seconds ({} s) for each process on its own, so the sandbox's processes together may use more",
                        crate::limits::rlimit_cpu_seconds(lim.cpu_time.unwrap_or_default())
                    )
                } else {
                    String::new()
                },
                raise("cpu_time")
            )),
            _ => None,
        });
    }

    // The export tmpfs: a run that ended well is not done until init copied it out.
    if spec.export.is_some() && status == Status::Ok {
        let exported = ended.msgs.iter().find_map(|m| match m {
            Msg::Exported { error } => Some(error.clone()),
            _ => None,
        });
        let why = match exported {
            Some(None) => None,
            Some(Some(e)) => Some(e),
            None => Some(format!(
                "{} before it had copied {} out of the sandbox; the copy is incomplete",
                init_end(
                    &ended,
                    oom_reported,
                    lim,
                    "the files in the export directory count toward it; for a package install raise memory in the profile's [packages.limits]"
                ),
                spec.export.as_ref().map(|e| e.dir.as_str()).unwrap_or("?"),
            )),
        };
        if let Some(why) = why {
            status = Status::SandboxError;
            code = exit_codes::SANDBOX_ERROR;
            message = Some(why);
        }
    }
    // A collection cut short (init killed: OOM, the grace after a stop overrun, anything):
    // files are missing, and the result says so rather than look complete. Not expected when
    // init failed before the payload ran (it collects only once the payload has ended).
    let init_failed_first = setup_failure.is_some() && payload.is_none();
    if spec.collect.is_some() && !collected.done && !init_failed_first {
        let grace = super::supervise::STOP_GRACE.as_secs();
        let why = if let Some(cause) = ended.grace_expired {
            match cause {
                Grace::Stopped => format!(
                    "init had not finished {grace} s after cordon asked it to stop, and cordon killed the sandbox"
                ),
                Grace::Collecting => format!(
                    "init had not finished collecting {grace} s after the program ended (the files are too many or too large to send in that time), and cordon killed the sandbox"
                ),
            }
        } else {
            init_end(
                &ended,
                oom_reported,
                lim,
                &format!(
                    "the files in /workspace count toward it; raise it with {}",
                    raise("memory")
                ),
            )
        };
        let cut = collected.cut_off();
        let mut note = format!(
            "cordon could not collect all the files from /workspace: {why} before it had sent them all; the {} file(s) in `files` are complete, any others are missing",
            collected.files.len()
        );
        if let Some(path) = cut {
            note.push_str(&format!(
                " ({path} was cut off mid-transfer and is not kept)"
            ));
            collected.omitted.push(OmittedFile::new(
                path,
                "cut off mid-transfer: the collection did not finish".into(),
            ));
        }
        collected.omitted.push(OmittedFile::new(
            ".".into(),
            format!("the collection did not finish: {why}"),
        ));
        // The program's own outcome stands when it already failed; a success becomes cordon's
        // failure (as a file that cannot be written into --output-dir turns exit 0 into 125).
        if status == Status::Ok {
            status = Status::SandboxError;
            code = exit_codes::SANDBOX_ERROR;
        }
        message = Some(match message.take() {
            Some(m) => format!("{m}; {note}"),
            None => note,
        });
    } else if let Some(why) = collected.garbled.clone() {
        // A file lost in transit between init and cordon: cordon's failure, said as a
        // collection cut short is (a bug to report: init and cordon are the same binary).
        let note = format!(
            "cordon lost a file the sandbox's init sent ({why}); the {} file(s) in `files` are complete; please report this as a cordon bug",
            collected.files.len()
        );
        if status == Status::Ok {
            status = Status::SandboxError;
            code = exit_codes::SANDBOX_ERROR;
        }
        message = Some(match message.take() {
            Some(m) => format!("{m}; {note}"),
            None => note,
        });
    } else if status == Status::Ok && oom_reported == Some(true) {
        // The program succeeded although the kernel killed one of its processes at the memory
        // limit (a child it tolerated): its status stands, and the kill is explained.
        message = Some(format!(
            "the program exited with code 0, but the kernel OOM-killed one of its processes at the memory limit of {} (raise it with {})",
            lim.memory.map(human_size).unwrap_or_else(|| "?".into()),
            raise("memory")
        ));
    }

    // A fork bomb, or a program that ran short of processes: the counter says what the
    // status cannot (a run that timed out or failed because it could not fork). A program
    // that handled the failed forks and exited 0 keeps its status, and the note says it met
    // the limit (as for a child OOM-killed above): its work may have been done with fewer
    // processes than it asked for.
    if let (Some(n), Some(max)) = (metrics.pids_limit_hits.filter(|&n| n > 0), lim.pids)
        && status != Status::SandboxError
    {
        let note = format!(
            "fork or clone failed {n} time(s) at the limit of {max} processes and threads (raise it with {})",
            raise("pids")
        );
        add_note(&mut message, status == Status::Ok, note);
    }
    // A limit the program met as an errno it printed: nothing else tells cordon (a program
    // that ignores SIGXFSZ, as Python and Node do, gets EFBIG; EMFILE is a plain errno), and
    // the words say nothing of a limit. Likewise the network that is off by default.
    if matches!(status, Status::RuntimeError | Status::Signaled) {
        for note in errno_notes(&stderr_text, spec) {
            add_note(&mut message, false, note);
        }
    }
    if matches!(
        status,
        Status::Ok | Status::RuntimeError | Status::Signaled | Status::Timeout
    ) {
        // A program that succeeded gets the process-limit note alone: a fork bomb that waits
        // for its children exits 0 with every refused fork in its stderr (as with a cgroup,
        // whose counted refusals are noted for an `ok` run too).
        let ok = status == Status::Ok;
        for note in uncounted_limit_notes(
            spec,
            watch.as_ref(),
            metrics.pids_limit_hits,
            &stderr_text,
            ok,
        ) {
            add_note(&mut message, ok, note);
        }
    }
    // A tmpfs of the sandbox full when the program ended: a write there failed with ENOSPC
    // ("No space left on device", which says nothing of a limit) or the next one would. The
    // note names the limit to raise. Not for a run cordon ended itself (timeout, memory,
    // output): its own message says why.
    if matches!(status, Status::Ok | Status::RuntimeError | Status::Signaled) {
        for m in &ended.msgs {
            let Msg::Full { path, inodes } = m else {
                continue;
            };
            // The export directory is a tmpfs sized like the workspace.
            let export = spec.export.as_ref().is_some_and(|e| e.dir == *path);
            let path_key = if export { "/workspace" } else { path.as_str() };
            let (what, remedy) = match (path_key, inodes) {
                ("/workspace", false) => (
                    human_size(lim.workspace_size),
                    format!("raise it with {}", raise("workspace_size")),
                ),
                ("/workspace", true) => (
                    format!("{} files, directories and symlinks", lim.workspace_inodes),
                    format!("raise it with {}", raise("workspace_inodes")),
                ),
                ("/tmp" | "/dev/shm", false) => (
                    human_size(lim.tmp_size),
                    format!("raise it with {}", raise("tmp_size")),
                ),
                ("/tmp" | "/dev/shm", true) => (
                    format!("{} files, directories and symlinks", lim.tmp_inodes),
                    format!(
                        "that cap is fixed: write many small files in /workspace instead (its cap: {})",
                        raise("workspace_inodes")
                    ),
                ),
                _ => continue,
            };
            let note = format!(
                "{path} is full (all of its {what} are used), so a write there failed with ENOSPC (\"No space left on device\") or would; {remedy}"
            );
            add_note(&mut message, status == Status::Ok, note);
        }
    }
    // Files left out by the collection's caps: the program's output is incomplete, which
    // `filesOmitted` alone would leave to the caller to notice. (Entries skipped for what
    // they are, a symlink or a FIFO, are not said: they are never collected.)
    if let Some(c) = spec.collect.as_ref()
        && let Some(first) = collected
            .omitted
            .iter()
            .find(|f| f.reason.starts_with("over the "))
    {
        // A listing (names and sizes only) is held to the file count alone.
        // The program's own outputs' caps can be raised (a compile's, of its artifact, not).
        let name = |key: &str| spec.limit_naming.name(key);
        let raise = |keys: &[&str]| {
            let names: Vec<String> = keys.iter().map(|k| name(k)).collect();
            match c.only {
                None if names.len() == 1 => format!("raise the cap with {}, or ", names[0]),
                None => format!("raise the caps with {}, or ", names.join(" and ")),
                Some(_) => String::new(),
            }
        };
        let note = if c.contents {
            format!(
                "not every file in /workspace was collected: {} and maybe others are over the cap of {} files and {} (see `filesOmitted`); {}have the program write fewer or smaller files, or an archive of them",
                first.path,
                c.max_files,
                crate::spec::exact_size(c.max_bytes),
                raise(&["collect_files", "collect_size"]),
            )
        } else {
            format!(
                "not every file in /workspace was listed: {} and maybe others are over the cap of {} files (see `filesOmitted`); {}have the program write fewer files",
                first.path,
                c.max_files,
                raise(&["collect_files"]),
            )
        };
        add_note(&mut message, false, note);
    }
    let (memory_used, memory_used_source) = match (metrics.peak_memory, ended.rusage_maxrss) {
        (Some(p), _) => (Some(p), cgroup_source),
        // The watch's peak is a sum over the sandbox; ru_maxrss the largest single process.
        // (A kill at a cut the watch was shown, before any sample, has its estimate as peak.)
        (None, r)
            if watch
                .as_ref()
                .is_some_and(|w| (w.samples > 0 || w.over) && Some(w.peak) >= r) =>
        {
            (watch.as_ref().map(|w| w.peak), MetricSource::Polled)
        }
        (None, Some(r)) => (Some(r), MetricSource::Rusage),
        _ => (None, MetricSource::Unavailable),
    };
    let (cpu_time, cpu_time_source) = match (metrics.cpu_time, ended.rusage_cpu) {
        (Some(t), _) => (Some(t), cgroup_source),
        (None, Some(t)) => (Some(t), MetricSource::Rusage),
        _ => (None, MetricSource::Unavailable),
    };
    let (oom_killed, oom_killed_source) = match oom_reported {
        Some(v) => (v, cgroup_source),
        None if watch_over && status == Status::MemoryLimit => (true, MetricSource::Polled),
        None if oom_inferred => (true, MetricSource::Inferred),
        None => (false, MetricSource::Unavailable),
    };
    let (stdout_text, stdout_lossy, stdout_exact) = into_text(
        std::mem::take(&mut ended.stdout.data),
        spec.exact_output,
        ended.stdout.truncated,
    );
    let unlisted = collected.unlisted();
    Outcome {
        success: status == Status::Ok,
        status,
        output: stdout_text,
        error: stderr_text,
        exit_code,
        signal,
        signal_name: signal.map(signal_name),
        execution_time: crate::outcome::millis(ended.wall),
        cpu_time: cpu_time.map(crate::outcome::millis),
        cpu_time_source,
        memory_used,
        memory_used_source,
        oom_killed,
        oom_killed_source,
        pids_limit_hits: metrics.pids_limit_hits,
        output_truncated: ended.stdout.truncated || ended.stderr.truncated,
        stdout_bytes: ended.stdout.total,
        stderr_bytes: ended.stderr.total,
        output_lossy: stdout_lossy || stderr_lossy,
        output_encoding: crate::outcome::OutputEncoding::Utf8,
        output_bytes: stdout_exact,
        error_bytes: stderr_exact,
        message,
        cli_exit_code: code,
        limits,
        isolation,
        files: spec.collect.is_some().then_some(collected.files),
        directories: collected.directories,
        files_omitted_unlisted: unlisted,
        files_omitted: collected.omitted,
        language: None,
        compile: None,
        network: None,
        dependencies: None,
        execution_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::memwatch::WatchReport;
    use crate::outcome::LimitReport;

    fn spec() -> SandboxSpec {
        SandboxSpec::new(vec!["x".into()])
    }

    fn run(
        msgs: Vec<Msg>,
        f: impl FnOnce(&mut Ended),
        metrics: CgroupMetrics,
        limits: LimitsReport,
    ) -> Outcome {
        let mut e = Ended {
            msgs,
            ..Ended::default()
        };
        f(&mut e);
        outcome(&spec(), e, metrics, limits, IsolationReport::default())
    }

    /// At the output limit's cut, a character split in two is left out of the text whole,
    /// without a U+FFFD and without `outputLossy`; the exact bytes kept stay for base64. An
    /// output that ends in the same bytes without a cut is the program's: replaced, lossy.
    #[test]
    fn a_character_split_by_the_output_limit_is_left_out_whole() {
        let kept = "ééé".as_bytes()[..5].to_vec();
        assert_eq!(
            into_text(kept.clone(), false, true),
            ("éé".into(), false, None)
        );
        assert_eq!(
            into_text(kept.clone(), true, true),
            ("éé".into(), false, Some(kept.clone()))
        );
        assert_eq!(
            into_text(kept.clone(), false, false),
            ("éé\u{fffd}".into(), true, None)
        );
        // Invalid bytes before it are still replaced and said.
        let bad = b"\xff\xe2\x82".to_vec();
        assert_eq!(
            into_text(bad.clone(), true, true),
            ("\u{fffd}".into(), true, Some(bad))
        );
        // A cut between whole characters changes nothing.
        assert_eq!(
            into_text("éé".into(), true, true),
            ("éé".into(), false, None)
        );

        let o = run(
            vec![Msg::Exited { code: 0 }],
            |e| {
                e.output_limited = true;
                e.stdout.data = kept.clone();
                e.stdout.total = 1201;
                e.stdout.truncated = true;
                e.stderr.data = "€".as_bytes()[..2].to_vec();
                e.stderr.truncated = true;
            },
            CgroupMetrics::default(),
            LimitsReport::default(),
        );
        assert_eq!((o.output.as_str(), o.error.as_str()), ("éé", ""));
        assert!(!o.output_lossy);
        assert_eq!(o.stdout_bytes, 1201, "what the program wrote, kept or not");
        assert_eq!(o.status, Status::OutputLimit);
    }

    #[test]
    fn a_limit_met_as_an_errno_in_stderr_is_named_and_errno_names_are_whole_words() {
        let mut s = spec();
        s.limits.file_size = Some(1 << 20);
        s.limits.open_files = 64;
        let notes = |stderr: &str| errno_notes(stderr, &s);
        let n = notes("OSError: [Errno 27] File too large\n");
        assert!(
            n.len() == 1 && n[0].contains("1 MiB") && n[0].contains("--file-size"),
            "{n:?}"
        );
        let n = notes("Error: EMFILE: too many open files, open 'x'\n");
        assert!(n.len() == 1 && n[0].contains("64 descriptors"), "{n:?}");
        let n = notes("Error: getaddrinfo ENOTFOUND pypi.org\n");
        assert!(n.len() == 1 && n[0].contains("--net allow=HOST"), "{n:?}");
        // Names inside other words are not errnos; with the network on, no network note.
        assert!(notes("ModuleNotFoundError: No module named 'x'\nEFBIGGER\n").is_empty());
        s.network = crate::net::Network::Host;
        assert!(
            errno_notes("socket.gaierror: Temporary failure in name resolution", &s).is_empty()
        );
        // A request is told its field.
        s.network = crate::net::Network::None;
        s.limit_naming = LimitNaming::Request;
        let n = errno_notes("Temporary failure in name resolution", &s);
        assert!(n[0].contains(r#"config.network "allow=HOST"#), "{n:?}");
        // A compile has no network whatever the run's: it is not told to allow a host.
        for naming in [LimitNaming::CompileFlags, LimitNaming::CompileRequest] {
            s.limit_naming = naming;
            let n = errno_notes("dial tcp: lookup proxy.golang.org: no such host", &s);
            assert!(
                n[0].contains("a compile runs without network") && !n[0].contains("allow="),
                "{n:?}"
            );
        }
    }

    #[test]
    fn an_export_not_copied_out_is_a_sandbox_error() {
        let mut s = spec();
        s.export = Some(crate::spec::Export {
            dir: "/deps".into(),
            host: "/tmp/x".into(),
            seed: Vec::new(),
        });
        let with_end = |msgs: Vec<Msg>, killed: bool, metrics: CgroupMetrics| {
            let mut e = Ended {
                msgs,
                ..Ended::default()
            };
            if killed {
                init_killed(&mut e);
            }
            outcome(
                &s,
                e,
                metrics,
                Default::default(),
                IsolationReport::default(),
            )
        };
        let with = |msgs: Vec<Msg>| with_end(msgs, false, Default::default());
        let ok = with(vec![Msg::Exited { code: 0 }, Msg::Exported { error: None }]);
        assert_eq!((ok.status, ok.cli_exit_code), (Status::Ok, 0));
        let failed = with(vec![
            Msg::Exited { code: 0 },
            Msg::Exported {
                error: Some("cannot copy /deps out of the sandbox: more than 10 entries".into()),
            },
        ]);
        assert_eq!(
            (failed.status, failed.cli_exit_code),
            (Status::SandboxError, 125)
        );
        assert!(failed.message.unwrap().contains("more than 10 entries"));
        let cut = with(vec![Msg::Exited { code: 0 }]);
        assert_eq!(cut.status, Status::SandboxError);
        let m = cut.message.unwrap();
        assert!(m.contains("before it had copied /deps out"), "{m}");
        // Killed mid-copy: what killed it, and what to raise.
        let m = with_end(vec![Msg::Exited { code: 0 }], true, Default::default())
            .message
            .unwrap();
        assert!(
            m.contains("init was killed by SIGKILL before it had copied /deps"),
            "{m}"
        );
        let oomed = with_end(vec![Msg::Exited { code: 0 }], true, oom());
        assert_eq!(oomed.status, Status::SandboxError);
        let m = oomed.message.unwrap();
        assert!(
            m.contains("OOM-killed") && m.contains("[packages.limits]"),
            "{m}"
        );
        // A program that failed is reported as such: nothing was to be copied.
        let r = with(vec![Msg::Exited { code: 3 }]);
        assert_eq!((r.status, r.cli_exit_code), (Status::RuntimeError, 3));
    }

    #[test]
    fn a_full_tmpfs_names_its_limit() {
        let full = |path: &str, inodes| Msg::Full {
            path: path.into(),
            inodes,
        };
        let o = run(
            vec![full("/workspace", false), Msg::Exited { code: 1 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::RuntimeError, 1));
        let m = o.message.unwrap();
        assert!(
            m.starts_with("/workspace is full (all of its 256 MiB are used)")
                && m.contains("No space left on device")
                && m.ends_with("raise it with --workspace-size"),
            "{m}"
        );
        let o = run(
            vec![
                full("/tmp", false),
                full("/workspace", true),
                Msg::Exited { code: 0 },
            ],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!(o.status, Status::Ok);
        let m = o.message.unwrap();
        assert!(
            m.starts_with("the program exited with code 0, but /tmp is full")
                && m.contains("--tmp-size; /workspace is full")
                && m.ends_with("--workspace-inodes"),
            "{m}"
        );
        let o = run(
            vec![full("/dev/shm", true), Msg::Exited { code: 1 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        let m = o.message.unwrap();
        assert!(
            m.starts_with("/dev/shm is full (all of its 4096 files")
                && m.ends_with(
                    "write many small files in /workspace instead (its cap: --workspace-inodes)"
                ),
            "{m}"
        );
        // A package install's export directory is a tmpfs sized like the workspace, and its
        // limits are the profile's [packages.limits]. A directory the spec does not export
        // is not one of cordon's caps: nothing is said of it.
        let mut s = spec();
        s.export = Some(crate::spec::Export {
            dir: "/deps".into(),
            host: "/tmp/x".into(),
            seed: Vec::new(),
        });
        s.limit_naming = crate::spec::LimitNaming::Packages;
        s.limits.workspace_size = 8 << 20;
        let e = Ended {
            msgs: vec![
                full("/elsewhere", false),
                full("/deps", false),
                Msg::Exited { code: 1 },
            ],
            ..Ended::default()
        };
        let o = outcome(
            &s,
            e,
            Default::default(),
            Default::default(),
            IsolationReport::default(),
        );
        assert_eq!(
            o.message.as_deref(),
            Some(
                "/deps is full (all of its 8 MiB are used), so a write there failed with ENOSPC (\"No space left on device\") or would; raise it with workspace_size in the profile's [packages.limits]"
            )
        );
        // Nothing full: no message.
        let o = run(
            vec![Msg::Exited { code: 1 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!(o.message, None);
    }

    #[test]
    fn forks_refused_at_the_pids_limit_are_reported() {
        let hits = |n| CgroupMetrics {
            pids_limit_hits: Some(n),
            source: Some(MetricSource::CgroupV1),
            ..Default::default()
        };
        let o = run(
            vec![Msg::Exited { code: 1 }],
            |_| {},
            hits(5),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.pids_limit_hits),
            (Status::RuntimeError, Some(5))
        );
        let m = o.message.unwrap();
        assert!(
            m.contains("fork or clone failed 5 time(s)") && m.contains("--pids"),
            "{m}"
        );
        // A fork bomb stopped by the timeout: both causes are said.
        let o = run(
            vec![],
            |e| e.timed_out = true,
            hits(1000),
            Default::default(),
        );
        assert_eq!(o.status, Status::Timeout);
        let m = o.message.unwrap();
        assert!(
            m.contains("wall-clock") && m.contains("failed 1000 time(s)"),
            "{m}"
        );
        // A program that handled the refusals and exited 0: still ok, counted, and said.
        let o = run(
            vec![Msg::Exited { code: 0 }],
            |_| {},
            hits(3),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.pids_limit_hits),
            (Status::Ok, 0, Some(3))
        );
        let m = o.message.unwrap();
        assert!(
            m.starts_with("the program exited with code 0, but fork or clone failed 3 time(s)"),
            "{m}"
        );
        // None refused, or nothing counts them (rlimit): no note.
        let o = run(
            vec![Msg::Exited { code: 1 }],
            |_| {},
            hits(0),
            Default::default(),
        );
        assert_eq!((o.message, o.pids_limit_hits), (None, Some(0)));
        let o = run(
            vec![Msg::Exited { code: 1 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!(o.pids_limit_hits, None);
    }

    #[test]
    fn limits_that_count_nothing_are_named_from_what_was_seen() {
        let mut s = spec();
        s.limits.pids = Some(8);
        s.limits.memory = Some(32 << 20);
        let watch = |tasks: u64, refused: Option<u64>| WatchReport {
            tasks_peak: tasks,
            refused_request: refused,
            ..Default::default()
        };
        let notes = |w: Option<WatchReport>, hits: Option<u64>, stderr: &str| {
            uncounted_limit_notes(&s, w.as_ref(), hits, stderr, false)
        };
        // The watch saw init and 7 more: at --pids 8; 6 more is under it.
        let n = notes(Some(watch(7, None)), None, "");
        assert!(
            n.len() == 1
                && n[0].contains("saw the sandbox at its limit")
                && n[0].contains("8 processes")
                && n[0].contains("--pids"),
            "{n:?}"
        );
        assert!(notes(Some(watch(6, None)), None, "").is_empty());
        // Or the program's words, in each runtime's.
        for words in [
            "sh: 0: Cannot fork",
            "bash: fork: retry: Resource temporarily unavailable",
            "    pid = os.fork()\n          ^^^^^^^^^\nBlockingIOError: [Errno 11] Resource temporarily unavailable",
            "RuntimeError: can't start new thread",
            "runtime: failed to create new OS thread (have 3 already; errno=11)",
            "Error: spawn sleep EAGAIN",
        ] {
            let n = notes(None, None, words);
            assert!(
                n.len() == 1 && n[0].contains("could not start"),
                "{words}: {n:?}"
            );
        }
        // A cgroup counts the refusals (its own note), and EAGAIN alone is no fork.
        assert!(notes(Some(watch(7, None)), Some(0), "Cannot fork").is_empty());
        assert!(
            notes(
                None,
                None,
                "read: EAGAIN (Resource temporarily unavailable)"
            )
            .is_empty()
        );
        // A non-blocking read's BlockingIOError, or a spawn and an EAGAIN lines apart, is no
        // fork either.
        let nonblocking = "  File \"<string>\", line 1, in <module>\nBlockingIOError: [Errno 11] Resource temporarily unavailable";
        assert!(notes(None, None, nonblocking).is_empty());
        assert!(
            notes(
                None,
                None,
                "could not spawn helper\nlater\nstill later\nread: EAGAIN"
            )
            .is_empty()
        );
        // A thread's stack refused by RLIMIT_DATA: the memory note, not the pids one.
        let n = notes(
            Some(watch(2, Some(8 << 20))),
            None,
            "RuntimeError: can't start new thread",
        );
        assert!(
            n.len() == 1
                && n[0].contains("32 MiB refused a request for 8 MiB")
                && n[0].contains("--memory"),
            "{n:?}"
        );
        // Said beside a timeout, which the notes do not replace.
        let o = run(
            vec![],
            |e| {
                e.timed_out = true;
                e.memory_watch = Some(watch(0, Some(8 << 20)));
            },
            Default::default(),
            Default::default(),
        );
        let m = o.message.unwrap_or_default();
        assert!(
            o.status == Status::Timeout
                && m.contains("wall-clock")
                && m.contains("refused a request for 8 MiB"),
            "{m}"
        );
    }

    #[test]
    fn plain_exits() {
        let o = run(
            vec![Msg::Exited { code: 0 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.success),
            (Status::Ok, 0, true)
        );
        let o = run(
            vec![Msg::Exited { code: 7 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.exit_code),
            (Status::RuntimeError, 7, Some(7))
        );
        let o = run(
            vec![Msg::Signaled { signal: 11 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.signal_name.as_deref()),
            (Status::Signaled, 139, Some("SIGSEGV"))
        );
    }

    #[test]
    fn limits_win_over_the_exit() {
        let o = run(
            vec![Msg::Signaled { signal: 9 }],
            |e| e.timed_out = true,
            Default::default(),
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::Timeout, 124));
        let o = run(
            vec![],
            |e| e.output_limited = true,
            Default::default(),
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::OutputLimit, 137));
        let m = CgroupMetrics {
            oom_kills: Some(1),
            source: Some(MetricSource::CgroupV1),
            ..Default::default()
        };
        let o = run(
            vec![Msg::Signaled { signal: 9 }],
            |_| {},
            m,
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.oom_killed),
            (Status::MemoryLimit, 137, true)
        );
        assert_eq!(o.oom_killed_source, MetricSource::CgroupV1);
        // SIGXCPU is the CPU-time limit only with that limit set and most of it used: a
        // program that sends it to itself is not a timeout.
        let xcpu = |limit: Option<u64>, used_ms: u64| {
            let mut s = spec();
            s.limits.cpu_time = limit.map(std::time::Duration::from_secs);
            let e = Ended {
                msgs: vec![Msg::Signaled {
                    signal: libc::SIGXCPU,
                }],
                ..Ended::default()
            };
            let m = CgroupMetrics {
                cpu_time: Some(std::time::Duration::from_millis(used_ms)),
                ..Default::default()
            };
            let o = outcome(&s, e, m, Default::default(), IsolationReport::default());
            (o.status, o.cli_exit_code)
        };
        assert_eq!(xcpu(Some(1), 1004), (Status::Timeout, 124));
        assert_eq!(
            xcpu(Some(1), 854),
            (Status::Timeout, 124),
            "the counters run behind"
        );
        assert_eq!(xcpu(None, 1004), (Status::Signaled, 128 + libc::SIGXCPU));
        assert_eq!(xcpu(Some(1), 10), (Status::Signaled, 128 + libc::SIGXCPU));
    }

    #[test]
    fn a_limit_reached_names_what_raises_it() {
        for (naming, name) in [
            (crate::spec::LimitNaming::Flags, "raise it with --timeout"),
            (
                crate::spec::LimitNaming::CompileFlags,
                "raise it with --compile-timeout",
            ),
            (
                crate::spec::LimitNaming::Request,
                "raise it with config.timeout",
            ),
            (
                crate::spec::LimitNaming::CompileRequest,
                "raise it with config.compileTimeout",
            ),
        ] {
            let mut s = spec();
            s.limit_naming = naming;
            let e = Ended {
                timed_out: true,
                ..Ended::default()
            };
            let o = outcome(
                &s,
                e,
                Default::default(),
                Default::default(),
                IsolationReport::default(),
            );
            let m = o.message.unwrap_or_default();
            assert!(m.contains(name), "{naming:?}: {m}");
        }
    }

    #[test]
    fn allocation_failures_are_told_from_ordinary_errors() {
        for real in [
            "Traceback (most recent call last):\n  File \"<string>\", line 1\nMemoryError\n",
            "Traceback...\nMemoryError: cannot allocate array\n",
            "memory allocation of 1073741824 bytes failed\n",
            "fatal error: runtime: out of memory\n\ngoroutine 1 [running]:\n",
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n",
            "terminate called after throwing an instance of 'std::bad_alloc'\n",
            "bash: xmalloc: ../bash/make_cmd.c:100: cannot allocate 1048576 bytes (0 bytes allocated)\n",
            "sort: Cannot allocate memory\n",
        ] {
            assert!(looks_like_oom(real), "{real}");
        }
        for ordinary in [
            "error: cannot allocate widget\n",
            "failed to allocate a port: address in use\n",
            "ValueError: MemoryError is not a value\n",
            "memory allocation of the cache failed\n",
            "cannot allocate 3 widgets\n",
        ] {
            assert!(!looks_like_oom(ordinary), "{ordinary}");
        }
        // The start and the end of stderr count: Go's message heads a long goroutine dump;
        // a mention in the middle of a long log is not the program's last word.
        let go = format!(
            "fatal error: runtime: out of memory\n{}",
            "goroutine\n".repeat(5000)
        );
        assert!(looks_like_oom(&go));
        let middle = format!("{0}MemoryError\n{0}", "log line\n".repeat(2000));
        assert!(!looks_like_oom(&middle));
    }

    #[test]
    fn rlimit_memory_failure_is_inferred_only_under_rlimit() {
        let rl = LimitsReport {
            memory_bytes: Some(LimitReport {
                value: Some(1.0),
                enforcement: Enforcement::Rlimit,
                note: None,
            }),
            ..Default::default()
        };
        use crate::launch::memwatch::WatchReport;
        let limit = spec().limits.memory.unwrap();
        let f = |e: &mut Ended| e.stderr.data = b"Traceback...\nMemoryError\n".to_vec();
        // The program's words alone (any program may print them, far below the limit): its
        // own failure, its own code.
        let small = |e: &mut Ended| {
            f(e);
            e.rusage_maxrss = Some(10 << 20);
            e.memory_watch = Some(WatchReport {
                peak: 12 << 20,
                samples: 3,
                ..Default::default()
            });
        };
        let o = run(
            vec![Msg::Exited { code: 1 }],
            small,
            Default::default(),
            rl.clone(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.oom_killed),
            (Status::RuntimeError, 1, false)
        );
        // With a process grown to half the limit or more: the limit, inferred.
        let grown = |e: &mut Ended| {
            small(e);
            e.rusage_maxrss = Some(limit / 2);
        };
        let o = run(
            vec![Msg::Exited { code: 1 }],
            grown,
            Default::default(),
            rl.clone(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.oom_killed_source),
            (Status::MemoryLimit, 137, MetricSource::Inferred)
        );
        let m = o.message.unwrap();
        assert!(
            m.contains("inferred") && m.contains("a process had reached 256 MiB resident"),
            "{m}"
        );
        // With a request the watch saw the limit refuse (one large allocation, nothing grown).
        let refused = |e: &mut Ended| {
            small(e);
            e.memory_watch.as_mut().unwrap().refused_request = Some(1 << 30);
        };
        let o = run(
            vec![Msg::Exited { code: 1 }],
            refused,
            Default::default(),
            rl.clone(),
        );
        assert_eq!(o.status, Status::MemoryLimit);
        let m = o.message.unwrap();
        assert!(m.contains("a request for 1 GiB more was over it"), "{m}");
        // The sandbox's sampled memory, when it is the larger figure, is said as such.
        let sampled = |e: &mut Ended| {
            grown(e);
            e.memory_watch.as_mut().unwrap().peak = limit * 3 / 4;
        };
        let o = run(
            vec![Msg::Exited { code: 1 }],
            sampled,
            Default::default(),
            rl.clone(),
        );
        let m = o.message.unwrap();
        assert!(m.contains("memory had grown to 384 MiB"), "{m}");
        // Not under RLIMIT_DATA: never inferred.
        let o = run(
            vec![Msg::Exited { code: 1 }],
            grown,
            Default::default(),
            Default::default(),
        );
        assert_eq!(o.status, Status::RuntimeError);
        // A C++ program's abort on std::bad_alloc: the limit only with the same evidence.
        let abort = Msg::Signaled {
            signal: libc::SIGABRT,
        };
        let bad_alloc = |e: &mut Ended, rss: u64| {
            e.stderr.data =
                b"terminate called after throwing an instance of 'std::bad_alloc'\n".to_vec();
            e.rusage_maxrss = Some(rss);
        };
        let o = run(
            vec![abort.clone()],
            |e| bad_alloc(e, 1 << 20),
            Default::default(),
            rl.clone(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code),
            (Status::Signaled, 128 + libc::SIGABRT)
        );
        let o = run(
            vec![abort],
            |e| bad_alloc(e, limit),
            Default::default(),
            rl.clone(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.oom_killed_source),
            (Status::MemoryLimit, 137, MetricSource::Inferred)
        );
    }

    #[test]
    fn setup_failures_keep_their_exit_code() {
        let m = Msg::SetupFailed {
            step: "find".into(),
            message: "command not found".into(),
            exit_code: 127,
        };
        let o = run(
            vec![m, Msg::Exited { code: 127 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        // The caller's command, not cordon, failed: a runtime error with a shell's code.
        assert_eq!(
            (o.status, o.cli_exit_code, o.exit_code),
            (Status::RuntimeError, 127, Some(127))
        );
        assert!(o.message.unwrap().contains("not found"));
    }

    #[test]
    fn memory_watch_kill_is_memory_limit_polled() {
        use crate::launch::memwatch::WatchReport;
        let over = |e: &mut Ended| {
            e.rusage_maxrss = Some(50 << 20);
            e.memory_watch = Some(WatchReport {
                peak: 200 << 20,
                samples: 4,
                over: true,
                error: None,
                ..Default::default()
            })
        };
        let o = run(
            vec![Msg::Signaled { signal: 9 }],
            over,
            Default::default(),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.signal, o.oom_killed),
            (Status::MemoryLimit, 137, Some(9), true)
        );
        assert_eq!(o.oom_killed_source, MetricSource::Polled);
        assert_eq!(
            (o.memory_used, o.memory_used_source),
            (Some(200 << 20), MetricSource::Polled)
        );
        assert!(o.message.unwrap().contains("200 MiB"));
        // A watch that did not fire: the larger of its peak and ru_maxrss, labelled.
        let under = |e: &mut Ended| {
            e.rusage_maxrss = Some(50 << 20);
            e.memory_watch = Some(WatchReport {
                peak: 20 << 20,
                samples: 4,
                ..Default::default()
            })
        };
        let o = run(
            vec![Msg::Exited { code: 0 }],
            under,
            Default::default(),
            Default::default(),
        );
        assert_eq!(
            (o.status, o.oom_killed, o.memory_used_source),
            (Status::Ok, false, MetricSource::Rusage)
        );
    }

    #[test]
    fn blind_memory_watch_is_a_sandbox_error_after_setup_failures() {
        use crate::launch::memwatch::WatchReport;
        let blind = |e: &mut Ended| {
            e.memory_watch = Some(WatchReport {
                error: Some("cannot read the memory of the sandbox's process 7".into()),
                ..Default::default()
            })
        };
        let o = run(
            vec![Msg::Signaled { signal: 9 }],
            blind,
            Default::default(),
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::SandboxError, 125));
        assert!(o.message.unwrap().contains("process 7"));
        let failed = Msg::SetupFailed {
            step: "mount".into(),
            message: "EPERM".into(),
            exit_code: 125,
        };
        let o = run(vec![failed], blind, Default::default(), Default::default());
        assert!(o.message.unwrap().contains("cannot mount"));
    }

    /// init died before the program started and said nothing: the message says how it ended
    /// and where to look, over what failed after it; unless cordon killed it itself, for a
    /// memory watch that could not work, whose failure is then the reason.
    #[test]
    fn an_init_dead_before_the_program_is_named_as_the_cause() {
        let run = |status: WaitStatus, watch_error: Option<&str>| {
            let e = Ended {
                init_status: Some(status),
                memory_watch: watch_error.map(|w| crate::launch::memwatch::WatchReport {
                    error: Some(w.into()),
                    ..Default::default()
                }),
                ..Ended::default()
            };
            outcome(
                &spec(),
                e,
                Default::default(),
                Default::default(),
                Default::default(),
            )
        };
        let pid = nix::unistd::Pid::from_raw(2);
        let closed = "the sandbox's init closed the memory watch's channel";
        let o = run(
            WaitStatus::Signaled(pid, Signal::SIGSYS, false),
            Some(closed),
        );
        let m = o.message.clone().unwrap_or_default();
        assert_eq!((o.status, o.exit_code), (Status::SandboxError, None), "{m}");
        assert!(
            m.contains("init was killed by SIGSYS before the program started")
                && m.contains("dmesg")
                && !m.contains(closed),
            "{m}"
        );
        let m = run(WaitStatus::Exited(pid, 3), None)
            .message
            .unwrap_or_default();
        assert!(
            m.contains("init exited with code 3 before the program started"),
            "{m}"
        );
        let m = run(
            WaitStatus::Signaled(pid, Signal::SIGKILL, false),
            Some(closed),
        )
        .message
        .unwrap_or_default();
        assert!(m.starts_with(closed), "{m}");
        let m = run(WaitStatus::Signaled(pid, Signal::SIGKILL, false), None)
            .message
            .unwrap_or_default();
        assert!(
            m.contains("init was killed by SIGKILL before the program started"),
            "{m}"
        );
        // A limit reached before the program started (init writes the input files inside
        // the limits) is that limit, not an unexplained death.
        let killed = || Ended {
            init_status: Some(WaitStatus::Signaled(pid, Signal::SIGKILL, false)),
            ..Ended::default()
        };
        let o = outcome(
            &spec(),
            killed(),
            oom(),
            Default::default(),
            Default::default(),
        );
        assert_eq!(o.status, Status::MemoryLimit, "{:?}", o.message);
        let mut over = killed();
        over.memory_watch = Some(crate::launch::memwatch::WatchReport {
            over: true,
            ..Default::default()
        });
        let mut cpu = killed();
        cpu.cpu_timed_out = true;
        for (e, want) in [(over, Status::MemoryLimit), (cpu, Status::Timeout)] {
            let o = outcome(
                &spec(),
                e,
                Default::default(),
                Default::default(),
                Default::default(),
            );
            assert_eq!(o.status, want, "{:?}", o.message);
        }
    }

    /// A run that collects files, with `msgs` from init and the file messages in `files`.
    fn run_collecting(
        msgs: Vec<Msg>,
        files: Vec<Msg>,
        f: impl FnOnce(&mut Ended),
        metrics: CgroupMetrics,
    ) -> Outcome {
        let mut spec = spec();
        spec.collect = Some(crate::spec::Collect::default());
        spec.limits.memory = Some(128 << 20);
        let mut e = Ended {
            msgs,
            collected: crate::launch::collect::ReceivedFiles::new(64 << 20, 1000),
            ..Ended::default()
        };
        for m in files {
            assert!(e.collected.take(m).is_none());
        }
        f(&mut e);
        outcome(&spec, e, metrics, Default::default(), Default::default())
    }

    fn a_file(path: &str) -> Vec<Msg> {
        vec![
            Msg::FileStart {
                path: path.into(),
                mode: 0o644,
                size: 2,
            },
            Msg::FileBytes(b"ok".to_vec()),
            Msg::FileEnd { size: 2 },
        ]
    }

    /// The sandbox's init (pid 7 here) was SIGKILLed.
    fn init_killed(e: &mut Ended) {
        e.init_status = Some(WaitStatus::Signaled(
            nix::unistd::Pid::from_raw(7),
            Signal::SIGKILL,
            false,
        ))
    }

    fn oom() -> CgroupMetrics {
        CgroupMetrics {
            oom_kills: Some(1),
            source: Some(MetricSource::CgroupV1),
            ..Default::default()
        }
    }

    /// init OOM-killed in the middle of a file after the program exited 0: not a success,
    /// the message says what happened, and the cut-off file is listed.
    #[test]
    fn a_collection_cut_short_is_not_a_success() {
        let mut files = a_file("small.txt");
        files.push(Msg::FileStart {
            path: "big.bin".into(),
            mode: 0o644,
            size: 30 << 20,
        });
        files.push(Msg::FileBytes(vec![b'a'; 1000]));
        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            files.clone(),
            init_killed,
            oom(),
        );
        assert_eq!(
            (
                o.status,
                o.cli_exit_code,
                o.success,
                o.exit_code,
                o.oom_killed
            ),
            (Status::SandboxError, 125, false, Some(0), true)
        );
        let m = o.message.unwrap();
        assert!(
            m.contains("OOM-killed the sandbox's init at the memory limit of 128 MiB"),
            "{m}"
        );
        assert!(m.contains("big.bin was cut off"), "{m}");
        assert_eq!(o.files.as_ref().map(Vec::len), Some(1));
        assert_eq!(o.files.as_ref().unwrap()[0].path, "small.txt");
        let omitted: Vec<&str> = o.files_omitted.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(omitted, ["big.bin", "."]);
        assert!(o.files_omitted[1].reason.contains("did not finish"));

        // Killed otherwise, after a timeout whose grace init overran: the timeout stands and
        // the message has both.
        let o = run_collecting(
            vec![],
            files,
            |e| {
                init_killed(e);
                e.timed_out = true;
                e.grace_expired = Some(Grace::Stopped);
            },
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::Timeout, 124));
        let m = o.message.unwrap();
        assert!(
            m.contains("wall-clock limit") && m.contains("had not finished 5 s"),
            "{m}"
        );
    }

    /// A file lost between init and cordon (its end disagreeing with what arrived) turns a
    /// success into cordon's failure, saying which file; a grace that began when the program
    /// ended is said as such, not as a stop cordon asked for.
    #[test]
    fn a_file_lost_in_transit_or_a_slow_collection_is_reported() {
        let mut files = a_file("small.txt");
        files.push(Msg::FileStart {
            path: "lost.bin".into(),
            mode: 0o644,
            size: 4,
        });
        files.push(Msg::FileBytes(b"abc".to_vec()));
        files.push(Msg::FileEnd { size: 4 });
        files.push(Msg::CollectDone);
        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            files,
            |_| {},
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.exit_code),
            (Status::SandboxError, 125, Some(0))
        );
        let m = o.message.unwrap();
        assert!(
            m.contains("cordon lost a file") && m.contains("lost.bin"),
            "{m}"
        );
        assert_eq!(o.files.as_ref().map(Vec::len), Some(1));
        assert_eq!(o.files_omitted.len(), 1);
        assert_eq!(o.files_omitted[0].path, "lost.bin");

        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            a_file("small.txt"),
            |e| {
                init_killed(e);
                e.grace_expired = Some(Grace::Collecting);
            },
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::SandboxError, 125));
        let m = o.message.unwrap();
        assert!(
            m.contains("had not finished collecting 5 s after the program ended"),
            "{m}"
        );
        assert!(!m.contains("asked it to stop"), "{m}");
    }

    /// Files left out by the collection's caps are said in the message (the run stays ok);
    /// entries never collected for what they are (a symlink) are listed only.
    #[test]
    fn files_over_the_collection_caps_are_said() {
        let omitted = |path: &str, reason: &str| Msg::FileOmitted {
            path: path.into(),
            reason: reason.into(),
        };
        let mut files = a_file("small.txt");
        files.push(omitted("link", "symbolic link (not followed)"));
        files.push(Msg::CollectDone);
        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            files,
            |_| {},
            Default::default(),
        );
        assert_eq!(
            (o.status, o.message, o.files_omitted.len()),
            (Status::Ok, None, 1)
        );

        let mut files = a_file("small.txt");
        files.push(omitted("link", "symbolic link (not followed)"));
        files.push(omitted("big.bin", "over the total-size cap"));
        files.push(Msg::CollectDone);
        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            files,
            |_| {},
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::Ok, 0));
        let m = o.message.unwrap();
        assert!(
            m.starts_with("not every file in /workspace was collected: big.bin")
                && m.contains("1000 files and 64 MiB")
                && m.contains("raise the caps with --collect-files and --collect-size"),
            "{m}"
        );
    }

    /// The same exit with the collection complete is a success; with no collection asked
    /// for, or init failing before the payload ran, no collection is missed.
    #[test]
    fn a_complete_collection_or_none_is_not_reported() {
        let mut files = a_file("small.txt");
        files.push(Msg::CollectDone);
        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            files,
            |_| {},
            Default::default(),
        );
        assert_eq!(
            (o.status, o.cli_exit_code, o.message),
            (Status::Ok, 0, None)
        );
        assert_eq!(o.files.as_ref().map(Vec::len), Some(1));
        assert!(o.files_omitted.is_empty());

        let o = run(
            vec![Msg::Exited { code: 0 }],
            |_| {},
            Default::default(),
            Default::default(),
        );
        assert_eq!((o.status, o.message), (Status::Ok, None));

        let failed = Msg::SetupFailed {
            step: "mount".into(),
            message: "EPERM".into(),
            exit_code: 125,
        };
        let o = run_collecting(vec![failed], vec![], |_| {}, Default::default());
        let m = o.message.unwrap();
        assert!(m.contains("cannot mount") && !m.contains("collect"), "{m}");
    }

    /// Exit 0 with an OOM kill in the sandbox (a child the program tolerated) and every file
    /// collected: still ok, and the kill is explained rather than left beside `ok` unexplained.
    #[test]
    fn an_oom_kill_beside_exit_0_is_explained() {
        let o = run_collecting(
            vec![Msg::Exited { code: 0 }],
            vec![Msg::CollectDone],
            |_| {},
            oom(),
        );
        assert_eq!((o.status, o.oom_killed), (Status::Ok, true));
        let m = o.message.unwrap();
        assert!(
            m.contains("exited with code 0, but the kernel OOM-killed"),
            "{m}"
        );
    }

    #[test]
    fn interrupted_is_killed() {
        let o = run(
            vec![],
            |e| e.interrupted = Some(nix::sys::signal::Signal::SIGTERM),
            Default::default(),
            Default::default(),
        );
        assert_eq!((o.status, o.cli_exit_code), (Status::Killed, 143));
    }
}

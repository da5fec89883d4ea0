//! The result object: what happened in one run. The same shape in the library, in `--json`
//! output and (later) in the history file. Field names keep the ones agent tools already use
//! (`success`, `output`, `error`, `exitCode`, `executionTime`, `memoryUsed`).

use serde::Serialize;

/// How a run ended, from the caller's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The program exited with code 0.
    Ok,
    /// The program exited with a non-zero code.
    RuntimeError,
    /// The program was killed by a signal that no limit explains.
    Signaled,
    /// The wall-clock (or CPU-time) limit was reached and cordon killed the sandbox.
    Timeout,
    /// The memory limit was reached (an OOM kill, or an allocation failure at the limit).
    MemoryLimit,
    /// stdout or stderr exceeded the output limit; cordon killed the sandbox.
    OutputLimit,
    /// A compile phase failed (used by `cordon run` for compiled languages).
    CompileError,
    /// Installing the requested packages failed (`cordon run --packages`).
    DependencyError,
    /// cordon was interrupted (SIGINT/SIGTERM) and killed the sandbox.
    Killed,
    /// cordon itself could not set up or run the sandbox; nothing of the program ran (see
    /// `message`; the CLI exits 125). A command not found or not executable is a
    /// `RuntimeError` with `exitCode` 127 or 126 instead: the caller's to fix.
    SandboxError,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::RuntimeError => "runtime_error",
            Status::Signaled => "signaled",
            Status::Timeout => "timeout",
            Status::MemoryLimit => "memory_limit",
            Status::OutputLimit => "output_limit",
            Status::CompileError => "compile_error",
            Status::DependencyError => "dependency_error",
            Status::Killed => "killed",
            Status::SandboxError => "sandbox_error",
        }
    }
}

/// How one limit was enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    CgroupV2,
    CgroupV1,
    Rlimit,
    /// A size/inode cap on a tmpfs mount.
    Tmpfs,
    /// The CPUs the sandbox may run on (`--cpus` without a cgroup: whole CPUs).
    Affinity,
    /// cordon's supervisor (wall clock, output capture).
    Supervisor,
    /// The limit was requested but this host gave no way to enforce it.
    NotEnforced,
}

/// One limit: the value in force and what enforced it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitReport {
    /// The value, in the unit its name says (`Ms`, `Bytes`, a count, or CPUs): a JSON
    /// integer when it is whole (`536870912`, not `536870912.0`), for decoders that read
    /// these into integer types.
    #[serde(serialize_with = "whole_as_integer")]
    pub value: Option<f64>,
    pub enforcement: Enforcement,
    /// Why it is not enforced, or how (e.g. "RLIMIT_DATA: private writable memory, per process").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// All limits of a run, each with its enforcement.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LimitsReport {
    /// `cgroup-v2`, `cgroup-v1` or `rlimit`.
    pub backend: String,
    /// Which cgroup was used, or why the better backends were skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_note: Option<String>,
    pub wall_time_ms: Option<LimitReport>,
    pub cpu_time_ms: Option<LimitReport>,
    pub memory_bytes: Option<LimitReport>,
    pub cpus: Option<LimitReport>,
    pub pids: Option<LimitReport>,
    pub output_bytes: Option<LimitReport>,
    pub file_size_bytes: Option<LimitReport>,
    pub open_files: Option<LimitReport>,
    pub workspace_bytes: Option<LimitReport>,
    pub tmp_bytes: Option<LimitReport>,
}

/// Which isolation layers were active.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct IsolationReport {
    /// Namespaces created for the sandbox.
    pub namespaces: Vec<String>,
    /// Host uid the sandbox user maps to, and the uid/gid inside.
    pub host_uid: u32,
    pub uid: u32,
    pub gid: u32,
    /// `"enforced"`, `"partial"` or `"disabled (…)"` with the Landlock ABI.
    pub landlock: String,
    pub landlock_abi: Option<u32>,
    /// Name of the seccomp policy installed.
    pub seccomp: String,
    /// `"none"`: loopback only.
    pub network: String,
    pub rootfs: String,
    /// How read-only host directories are shown: `"private read-only overlays"` (file locks
    /// stay inside the sandbox), or read-only binds when the caller allowed that downgrade.
    pub host_views: String,
    /// Host directories shown inside (`--ro-bind`, installed packages), as
    /// `"/data <- /host/dir (read-only)"`; absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binds: Vec<String>,
    pub capabilities: String,
    pub no_new_privs: bool,
    /// What a crash's core dump becomes (see `limits::rlimit::CoreDumps`).
    pub core_dumps: String,
}

/// Where a metric came from, so a caller knows how far to trust it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetricSource {
    CgroupV2,
    CgroupV1,
    Rusage,
    /// Deduced from the way the program ended, not reported by the kernel.
    Inferred,
    /// Sampled by cordon's supervisor while the program ran (the rlimit backend's memory
    /// watch: a sum over the sandbox's processes every 20-50 ms; a peak between two samples
    /// is not seen).
    Polled,
    Unavailable,
}

/// A file the program left in /workspace, brought back after every process was dead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputFile {
    /// Relative to /workspace.
    pub path: String,
    pub size: u64,
    /// Permission bits as found (only 0o777).
    #[serde(skip)]
    pub mode: u32,
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// A file that was not brought back, and why (a symlink, a FIFO, over the caps, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OmittedFile {
    /// Relative to /workspace; a name that is not UTF-8 with U+FFFD for what is not.
    pub path: String,
    /// The exact bytes of `path` (base64, standard alphabet, padded) when they are not
    /// UTF-8, and `path` only shows them; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    pub reason: String,
}

impl OmittedFile {
    /// An omission of a path that is UTF-8.
    pub fn new(path: String, reason: String) -> Self {
        OmittedFile {
            path,
            path_base64: None,
            reason,
        }
    }
}

/// Why cordon failed before anything ran (the error object's `errorKind`), for a client
/// that must tell its own mistake from the host's without reading the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// What was asked cannot be run as asked: an invalid command line or request, a name of
    /// something that is not there (a language, a file, a directory), a value past the
    /// operator's ceilings. Change the request.
    Request,
    /// cordon could not set up the sandbox here (a kernel feature, a permission, a cgroup, a
    /// root filesystem, a cache, I/O): the same request may run on another host or after the
    /// operator's fix (`cordon doctor` says what is missing).
    Setup,
}

/// A duration in milliseconds, to the microsecond: `19.961`, not the `19.961409999999997` of
/// a float's division (the clocks cordon reads are no finer).
pub fn millis(d: std::time::Duration) -> f64 {
    round_ms(d.as_nanos() as f64 / 1e6)
}

/// Milliseconds rounded to the microsecond (a sum of [`millis`] figures).
pub fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The compile phase of a compiled language (`cordon run`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompileReport {
    /// `ok`, `compile_error`, `timeout`, `memory_limit`, ... of the compiler's sandbox.
    pub status: Status,
    /// True when the artifact came from the compile cache (nothing was compiled).
    pub cached: bool,
    pub exit_code: Option<i32>,
    pub output: String,
    pub error: String,
    pub execution_time: f64,
    /// CPU time of the compiler's sandbox, in milliseconds; null when cached.
    pub cpu_time: Option<f64>,
    /// Where `cpu_time` came from, as the result's own `cpuTimeSource` (`unavailable` when
    /// cached: nothing ran to be measured).
    pub cpu_time_source: MetricSource,
    /// Peak memory of the compiler's sandbox, in bytes (under `rusage`, its largest single
    /// process); null when cached.
    pub memory_used: Option<u64>,
    /// Where `memory_used` came from, as the result's own `memoryUsedSource` (`unavailable`
    /// when cached).
    pub memory_used_source: MetricSource,
}

/// The dependency installation of `cordon run --packages`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReport {
    /// `pip` or `npm`.
    pub installer: String,
    pub packages: Vec<String>,
    /// True when the installed set came from cordon's cache (no install ran, no network).
    pub cached: bool,
    /// `ok`, `dependency_error`, `timeout`, ... of the install sandbox (`ok` when cached).
    pub status: Status,
    pub output: String,
    pub error: String,
    pub execution_time: f64,
    /// The install sandbox's peak memory (under a cgroup its tmpfs files, the set being
    /// installed among them, included); null when cached.
    pub memory_used: Option<u64>,
    /// The install sandbox's network counters (absent when cached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::net::NetworkReport>,
    /// pip: the root filesystem's distributions that the set replaces with another version
    /// (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadowed: Vec<ShadowedDistribution>,
}

/// A distribution of the root filesystem that an installed set shadows (the set comes first
/// on the path) at another version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowedDistribution {
    /// Its name, normalized (`python-dateutil`).
    pub name: String,
    /// The set's version, which the program imports.
    pub version: String,
    /// The root filesystem's version.
    pub rootfs_version: String,
    /// The root filesystem's distributions that depend on it (by their metadata, and dpkg's)
    /// and that the set does not replace too: they now run with the set's version, which
    /// they may not have been built for.
    pub dependents: Vec<String>,
}

/// How a result's `output` and `error` hold what the program wrote (`--output-encoding`, a
/// request's `outputEncoding`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum OutputEncoding {
    /// UTF-8 text, bytes that are not UTF-8 replaced by U+FFFD (`outputLossy` says so); a
    /// character split by the output limit's cut is left out whole.
    #[default]
    Utf8,
    /// Base64 (standard alphabet, padded) of the exact bytes kept.
    Base64,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// True when status is `ok`.
    pub success: bool,
    pub status: Status,
    /// Captured stdout (UTF-8; invalid bytes replaced, see `outputLossy`), or its base64 when
    /// `output_encoding` says so.
    pub output: String,
    /// Captured stderr, as `output`.
    pub error: String,
    /// The program's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal number that killed the program, when it was killed.
    pub signal: Option<i32>,
    pub signal_name: Option<String>,
    /// Wall time of the run, in milliseconds.
    pub execution_time: f64,
    /// CPU time (user + system) of every process of the sandbox, in milliseconds.
    pub cpu_time: Option<f64>,
    pub cpu_time_source: MetricSource,
    /// Peak memory of the sandbox, in bytes.
    pub memory_used: Option<u64>,
    pub memory_used_source: MetricSource,
    /// Whether the kernel OOM-killed a process of the sandbox.
    pub oom_killed: bool,
    pub oom_killed_source: MetricSource,
    /// How many times a fork or clone failed at the pids limit (the cgroup's `pids.events`);
    /// null where nothing counts them (the rlimit backend: RLIMIT_NPROC has no counter).
    pub pids_limit_hits: Option<u64>,
    /// True when stdout or stderr was cut at the output limit.
    pub output_truncated: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// True when `output`/`error` had invalid UTF-8 that was replaced (a character split by
    /// the output limit's cut is left out instead, and does not count).
    pub output_lossy: bool,
    /// How `output` and `error` hold the bytes: `utf8` text, or `base64` of the exact bytes
    /// (see [`Outcome::encode_output`]).
    pub output_encoding: OutputEncoding,
    /// The exact bytes of stdout when `output` is not (they were not UTF-8, or the output
    /// limit's cut split a character, which the text leaves out); `None` when `output`'s own
    /// bytes are the exact ones. Not part of the JSON result.
    #[serde(skip)]
    pub output_bytes: Option<Vec<u8>>,
    /// The same for stderr and `error`.
    #[serde(skip)]
    pub error_bytes: Option<Vec<u8>>,
    /// A human sentence for anything that is not a plain exit: what happened and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The exit code the `cordon` CLI exits with for this result.
    pub cli_exit_code: i32,
    pub limits: LimitsReport,
    pub isolation: IsolationReport,
    /// Files the program wrote; absent when no collection was asked for (`cordon exec`
    /// without `--output-dir`), which is not the same as none written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<OutputFile>>,
    /// The directories the program left in /workspace that hold no file of `files` and no
    /// directory of this list (relative to /workspace; those above each are implied, as a
    /// file's are): empty ones, or ones whose entries were all left out. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files_omitted: Vec<OmittedFile>,
    /// How many more entries were left behind than `files_omitted` lists (it holds at most
    /// a few hundred).
    #[serde(skip_serializing_if = "is_zero")]
    pub files_omitted_unlisted: u64,
    /// `cordon run`: the language, and the compile phase when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileReport>,
    /// The network mode and, for `allow`, every admitted and refused connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::net::NetworkReport>,
    /// `cordon run --packages`: the dependency installation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<DependencyReport>,
    /// `cordon run`: the id of this run in the history file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
}

impl Outcome {
    /// Puts `output` and `error` in `encoding`. For `base64`, each becomes the base64 of the
    /// exact bytes the program wrote (those kept under the output limit), and `outputLossy`
    /// is false: nothing was replaced, unless a stream's text had replaced bytes whose exact
    /// form was not kept (then that is still said). UTF-8 is how a result starts, so asking
    /// for it changes nothing, and neither does asking twice.
    pub fn encode_output(&mut self, encoding: OutputEncoding) {
        if encoding == OutputEncoding::Utf8 || self.output_encoding == encoding {
            return;
        }
        let unkept =
            |exact: &Option<Vec<u8>>, text: &str| exact.is_none() && text.contains('\u{FFFD}');
        let still_lossy = self.output_lossy
            && (unkept(&self.output_bytes, &self.output) || unkept(&self.error_bytes, &self.error));
        let output = std::mem::take(&mut self.output);
        self.output = base64_of_exact(self.output_bytes.take(), output);
        let error = std::mem::take(&mut self.error);
        self.error = base64_of_exact(self.error_bytes.take(), error);
        self.output_lossy = still_lossy;
        self.output_encoding = encoding;
    }
}

/// The base64 of the exact bytes behind `text`: `exact` when `text` is still their lossy
/// rendering (code that replaced the text, such as a failed install clearing the program's
/// output, left `exact` behind, and then the text is what the result holds), else `text`'s
/// own bytes. The text is dropped before the encoding is made: an output of 10 MiB costs its
/// bytes, its text and the encoding at most, not another copy.
fn base64_of_exact(exact: Option<Vec<u8>>, text: String) -> String {
    use base64::Engine;
    let b64 = &base64::engine::general_purpose::STANDARD;
    match exact {
        Some(bytes) if is_text_of(&bytes, &text) => {
            drop(text);
            b64.encode(bytes)
        }
        _ => b64.encode(text),
    }
}

/// Whether `text` is what [`Outcome`]'s text makes of `bytes`: their lossy rendering, or that
/// of the bytes before a character the output limit's cut split (left out whole).
fn is_text_of(bytes: &[u8], text: &str) -> bool {
    let split = split_char_len(bytes);
    is_lossy_text_of(bytes, text)
        || (split > 0 && is_lossy_text_of(&bytes[..bytes.len() - split], text))
}

/// How many bytes at the end of `bytes` are the start of a multi-byte UTF-8 character cut
/// off before its end (1 to 3: a lead byte and the continuation bytes that may follow it, a
/// sequence that its next bytes could still make valid), or 0 when `bytes` end anywhere
/// else (a whole character, or bytes no continuation could make valid).
pub fn split_char_len(bytes: &[u8]) -> usize {
    // A valid sequence is at most 4 bytes: a cut one is at most 3.
    (1..=bytes.len().min(3))
        .find(|&n| {
            std::str::from_utf8(&bytes[bytes.len() - n..])
                .is_err_and(|e| e.valid_up_to() == 0 && e.error_len().is_none())
        })
        .unwrap_or(0)
}

/// Whether `text` is `String::from_utf8_lossy(bytes)`, compared without making it: each
/// run of valid UTF-8 as it is, each invalid sequence as one U+FFFD.
fn is_lossy_text_of(bytes: &[u8], text: &str) -> bool {
    let mut rest = text.as_bytes();
    for chunk in bytes.utf8_chunks() {
        let Some(r) = rest.strip_prefix(chunk.valid().as_bytes()) else {
            return false;
        };
        rest = r;
        if !chunk.invalid().is_empty() {
            let Some(r) = rest.strip_prefix("\u{fffd}".as_bytes()) else {
                return false;
            };
            rest = r;
        }
    }
    rest.is_empty()
}

/// The CLI exit code conventions (GNU timeout, env, podman, docker):
/// the program's own code; 128+N for signal N; 124 timeout; 125 cordon failed;
/// 126 cannot execute; 127 not found; 137 (128+SIGKILL) for memory and output limit kills.
pub mod exit_codes {
    pub const TIMEOUT: i32 = 124;
    pub const SANDBOX_ERROR: i32 = 125;
    pub const CANNOT_EXECUTE: i32 = 126;
    pub const NOT_FOUND: i32 = 127;
    pub const KILLED: i32 = 128 + libc::SIGKILL;
}

/// The name of a signal number ("SIGKILL"), for messages and the result.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{sig}"))
}

/// Serializes a whole number that fits an integer exactly as a JSON integer, anything else
/// (`0.5` CPUs) as a float.
fn whole_as_integer<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    // 2^53: every integer up to it is exact in an f64.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match *v {
        Some(x) if x.fract() == 0.0 && (0.0..=EXACT).contains(&x) => s.serialize_u64(x as u64),
        Some(x) => s.serialize_f64(x),
        None => s.serialize_none(),
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_milliseconds_to_the_microsecond() {
        let d = std::time::Duration::from_nanos(19_961_409_999);
        assert_eq!(millis(d), 19961.41);
        assert_eq!(
            millis(std::time::Duration::from_nanos(19_961_409)).to_string(),
            "19.961"
        );
        assert_eq!(round_ms(19.961 + 403.8).to_string(), "423.761");
        assert_eq!(millis(std::time::Duration::ZERO), 0.0);
    }

    fn outcome(output: &str, error: &str) -> Outcome {
        Outcome {
            success: true,
            status: Status::Ok,
            output: output.into(),
            error: error.into(),
            exit_code: Some(0),
            signal: None,
            signal_name: None,
            execution_time: 0.0,
            cpu_time: None,
            cpu_time_source: MetricSource::Unavailable,
            memory_used: None,
            memory_used_source: MetricSource::Unavailable,
            oom_killed: false,
            oom_killed_source: MetricSource::Unavailable,
            pids_limit_hits: None,
            output_truncated: false,
            stdout_bytes: output.len() as u64,
            stderr_bytes: error.len() as u64,
            output_lossy: false,
            output_encoding: OutputEncoding::Utf8,
            output_bytes: None,
            error_bytes: None,
            message: None,
            cli_exit_code: 0,
            limits: LimitsReport::default(),
            isolation: IsolationReport::default(),
            files: None,
            directories: Vec::new(),
            files_omitted: Vec::new(),
            files_omitted_unlisted: 0,
            language: None,
            compile: None,
            network: None,
            dependencies: None,
            execution_id: None,
        }
    }

    #[test]
    fn base64_output_holds_the_exact_bytes() {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let all: Vec<u8> = (0..=255u8).collect();
        let mut o = outcome(&String::from_utf8_lossy(&all), "é\n");
        o.output_lossy = true;
        o.output_bytes = Some(all.clone());
        o.encode_output(OutputEncoding::Utf8);
        assert_eq!(
            o.output_encoding,
            OutputEncoding::Utf8,
            "utf8 changes nothing"
        );
        assert!(o.output_lossy);
        o.encode_output(OutputEncoding::Base64);
        assert_eq!(o.output, b64(&all));
        assert_eq!(o.error, b64("é\n".as_bytes()));
        assert!(!o.output_lossy, "nothing was replaced");
        let json = serde_json::to_value(&o).unwrap();
        assert_eq!(json["outputEncoding"], "base64");
        assert!(
            json.get("outputBytes").is_none(),
            "the raw bytes stay out of the result"
        );
        // Twice is once.
        o.encode_output(OutputEncoding::Base64);
        assert_eq!(o.output, b64(&all));
        // A stream whose text replaced bytes that were not kept: its base64 is of that text,
        // and the result still says it is lossy.
        let mut o = outcome("ok\n", &String::from_utf8_lossy(b"bad \xff\n"));
        o.output_lossy = true;
        o.encode_output(OutputEncoding::Base64);
        assert!(o.output_lossy, "the loss is still said");
        // The comparison with the lossy text, made without building it.
        for bytes in [
            &b"a\xffb\xe2\x82"[..],
            b"",
            b"\xf0\x9f\x98\x80 ok \xc3\x28",
            &all,
        ] {
            let text = String::from_utf8_lossy(bytes);
            assert!(is_lossy_text_of(bytes, &text), "{bytes:?}");
            assert!(!is_lossy_text_of(bytes, &format!("{text}x")), "{bytes:?}");
            assert!(
                !is_lossy_text_of(bytes, &text.replace('\u{fffd}', "?"))
                    || !text.contains('\u{fffd}')
            );
        }
        // Text that replaced the program's output (a failed install clears it) is what is
        // encoded, not the bytes left behind.
        let mut o = outcome("", "");
        o.output_bytes = Some(vec![0xff]);
        o.encode_output(OutputEncoding::Base64);
        assert_eq!(o.output, "");
        assert_eq!(
            serde_json::to_value(outcome("", "")).unwrap()["outputEncoding"],
            "utf8"
        );
    }

    #[test]
    fn a_character_cut_off_at_the_end_is_measured() {
        let e = "é".as_bytes();
        let euro = "€".as_bytes();
        let smile = "😀".as_bytes();
        for (bytes, want) in [
            (&b""[..], 0),
            (b"abc", 0),
            (e, 0),
            (&e[..1], 1),
            (euro, 0),
            (&euro[..1], 1),
            (&euro[..2], 2),
            (smile, 0),
            (&smile[..1], 1),
            (&smile[..2], 2),
            (&smile[..3], 3),
            // Bytes that no continuation could make valid are not a cut character.
            (b"a\x80", 0),
            (b"a\xff", 0),
            (b"a\xc0", 0),
            (b"a\xe0\x80", 0),
            (b"a\xed\xa0", 0),
            (b"a\xf5", 0),
            (b"\xe2\x82\xac\xe2\x82", 2),
            (b"\xff\xc3", 1),
        ] {
            assert_eq!(split_char_len(bytes), want, "{bytes:x?}");
        }
    }

    /// A stream whose text left out a character the cut split: its base64 is of the bytes
    /// kept, that character's first bytes included.
    #[test]
    fn base64_of_a_cut_output_keeps_the_split_characters_bytes() {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let kept = "aé".as_bytes()[..2].to_vec();
        let mut o = outcome("a", "");
        o.output_bytes = Some(kept.clone());
        o.encode_output(OutputEncoding::Base64);
        assert_eq!(o.output, b64(&kept));
        assert!(!o.output_lossy);
        // With bytes replaced before it too.
        let kept = b"\xffa\xe2\x82".to_vec();
        let mut o = outcome("\u{fffd}a", "");
        o.output_lossy = true;
        o.output_bytes = Some(kept.clone());
        o.encode_output(OutputEncoding::Base64);
        assert_eq!(o.output, b64(&kept));
        assert!(!o.output_lossy);
        // Text that is neither rendering is what is encoded.
        let mut o = outcome("b", "");
        o.output_bytes = Some(kept);
        o.encode_output(OutputEncoding::Base64);
        assert_eq!(o.output, b64(b"b"));
    }

    #[test]
    fn whole_limit_values_are_json_integers() {
        let json = |value| {
            serde_json::to_value(LimitReport {
                value,
                enforcement: Enforcement::Supervisor,
                note: None,
            })
            .unwrap()["value"]
                .clone()
        };
        assert!(
            json(Some(536870912.0)).is_u64(),
            "{}",
            json(Some(536870912.0))
        );
        assert_eq!(json(Some(536870912.0)).as_u64(), Some(536870912));
        assert_eq!(json(Some(0.5)).as_f64(), Some(0.5));
        assert!(json(Some(0.5)).is_f64());
        assert!(json(Some(1e300)).is_f64());
        assert!(json(None).is_null());
    }
}

//! The rlimits the payload sets on itself just before `execve`, and the fallbacks for the
//! cgroup-type limits when no cgroup could be had.

use super::{Backend, Rlimit};
use crate::outcome::{Enforcement, LimitReport};
use crate::spec::Limits;

/// The README section with the whole account of the memory watch; every memory note of the
/// rlimit backend names it.
pub const README_SECTION: &str = "Memory without a cgroup: the polled watch";

/// How `--memory` is held without a cgroup, in brief: the memory note of every rlimit-backend
/// result (see [`memory_note`]). Only what a program's author needs to read a run: that the
/// limit is polled, and every call it makes fail; the whole account is [`memory_account`].
pub const NOTE_WATCH: &str = "RLIMIT_DATA per process plus the sandbox's sum polled every 20-50 ms: not a hard cap (may overshoot by one interval); shared anonymous mappings count at full length. ENOSYS: memfd_create, memfd_secret, fanotify_init, landlock_create_ruleset, vmsplice, tee; EINVAL: splice, sendfile, unsharing the fd table; EOPNOTSUPP: SO_SNDBUF, SO_ZEROCOPY, MSG_OOB; EPERM: F_SETPIPE_SZ; EAFNOSUPPORT: sockets but unix, TCP, UDP; /dev/zero unmappable";
/// SysV shared memory, for the host's root: init sets the IPC namespace's sysctls...
pub const NOTE_SYSV_SET: &str = "SysV shmmax/shmall = the limit";
/// ...which no other caller can.
pub const NOTE_SYSV_UNSET: &str = "SysV shmmax/shmall unset (unprivileged)";
/// Socket buffers under `--net host`.
pub const NOTE_HOST_NET: &str = "--net host: socket buffers not counted";
/// TCP where Landlock cannot refuse it: refused with the network off...
pub const NOTE_TCP_REFUSED: &str = "EACCES: TCP sockets (Landlock ABI < 4)";
/// ...and not counted under `--net allow=`.
pub const NOTE_TCP_UNCOUNTED: &str =
    "not counted: unread data of a reset loopback TCP connection (Landlock ABI < 4)";

/// The whole account of the memory watch: what it counts, what it refuses and why, and what
/// it cannot count (`cordon doctor`'s rlimit-fallback check; the README section
/// [`README_SECTION`] has it at length, with the measurements).
pub const ACCOUNT_WATCH: &str = "RLIMIT_DATA caps each process's private writable memory; the supervisor also polls the whole sandbox every 20 ms (50 ms after the first second) and kills it when the sum exceeds the limit: per process Pss_Anon + Pss_Shmem + SwapPss (private memory, MAP_SHARED mappings, SysV and /dev/shm pages mapped by a process, shared pages counted once), plus each shared anonymous mapping at its whole length (its pages may have left every page table but not the mapping's object, so it counts as RLIMIT_AS would count it, and a mapping cut down by munmap or mremap still counts at the length it was seen at), each SysV segment, message queue and semaphore set, the files in /tmp, /dev/shm and /workspace (each counted once), each pipe or FIFO a descriptor holds at its whole 16-page buffer (F_SETPIPE_SZ answers EPERM), each item an epoll instance watches, each process's page tables and mappings (256 bytes each), and the data queued on the sandbox's unix, TCP and UDP sockets, read from the kernel's sock_diag (other socket families and protocols answer EAFNOSUPPORT); memfd_create, memfd_secret, fanotify_init and landlock_create_ruleset answer ENOSYS, as inotify_init does in every run (a memfd kept only by a partial mapping or by a descriptor in flight on a socket would be out of the watch's sight, and programs fall back to /dev/shm; an inotify or fanotify queue or a Landlock ruleset shows nowhere), so do vmsplice and tee, and splice and sendfile answer EINVAL (a buffer holding a byte would keep a whole page), SO_SNDBUF, SO_ZEROCOPY and MSG_OOB answer EOPNOTSUPP, and a thread cannot leave its process's descriptor table, which the watch lists (clone of a thread without CLONE_FILES, unshare(CLONE_FILES): EINVAL). Every mmap with MAP_SHARED|MAP_ANONYMOUS waits for the watch, which records its length: a shared anonymous object counts at no less than the length it was made with, however its mappings are cut down before a sample sees them; an object whose creation the watch was not shown ends the run (sandbox_error, the watch blind); every private writable request of 4 MiB or more (mmap, mremap, mprotect) waits for it too, which notes whether RLIMIT_DATA refuses it (the evidence that an allocation failure the program reports was the limit); /dev/zero is the host's /dev/full (zeros to read, no mmap, ENOSPC to write). Polled: a fast allocator can overshoot by what it allocates in one interval; a sample that takes the supervisor more than 1 s of CPU (processes with tens of thousands of mappings) ends the run";
/// SysV shared memory, whoever the caller.
pub const ACCOUNT_SYSV: &str = "SysV shm: the watch counts every segment of the sandbox's IPC namespace; for the host's root, init also sets kernel.shmmax and kernel.shmall to the limit (shmget fails past it); for any other caller they cannot be set (only the IPC namespace's root uid may write them, and the sandbox's user namespace maps uid 1000 alone)";
/// Socket buffers under `--net host`.
pub const ACCOUNT_HOST_NET: &str = "--net host is refused unless --allow-degraded socket-memory, and then the data queued on the sandbox's sockets is not counted (they are in the host's network namespace, among the host's own sockets; a network namespace of its own, the default, lets the watch count them)";
/// TCP where Landlock cannot refuse it.
pub const ACCOUNT_TCP: &str = "where Landlock cannot refuse TCP connections on the sandbox's loopback (ABI below 4, Linux before 6.7), a connection whose peer reset keeps unread data out of the watch's sight: with the network off, TCP sockets answer EACCES (isolation.seccomp adds +no-tcp); under --net allow=, which needs TCP to the proxy, such data is not counted";

/// How TCP on the sandbox's loopback stands under the memory watch: a connection whose peer
/// reset keeps its unread data out of the sock_diag dumps the watch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpUnderWatch {
    /// Landlock (ABI 4+) refuses the connects that would make such a pair (or the network is
    /// the host's, noted otherwise).
    Landlock,
    /// Landlock cannot; with the network off, TCP sockets are refused (the no-tcp layer).
    Refused,
    /// Landlock cannot, and `--net allow=` with Landlock degraded needs TCP to the proxy.
    Uncounted,
}

/// The memory note of the rlimit backend, in every result it gives: [`NOTE_WATCH`], what
/// differs for this caller and run, and where the whole account is. Kept short (it is the
/// same text run after run); [`memory_account`] is the rest.
pub fn memory_note(root_caller: bool, own_netns: bool, tcp: TcpUnderWatch) -> String {
    let mut note = format!(
        "{NOTE_WATCH}; {}",
        if root_caller {
            NOTE_SYSV_SET
        } else {
            NOTE_SYSV_UNSET
        }
    );
    if !own_netns {
        note.push_str("; ");
        note.push_str(NOTE_HOST_NET);
    }
    match tcp {
        TcpUnderWatch::Landlock => {}
        TcpUnderWatch::Refused => {
            note.push_str("; ");
            note.push_str(NOTE_TCP_REFUSED);
        }
        TcpUnderWatch::Uncounted => {
            note.push_str("; ");
            note.push_str(NOTE_TCP_UNCOUNTED);
        }
    }
    note.push_str(&format!(
        ". Full account: `cordon doctor`, README \"{README_SECTION}\""
    ));
    note
}

/// The whole account of the memory watch, for every caller and run (`cordon doctor`).
pub fn memory_account() -> String {
    format!("{ACCOUNT_WATCH}; {ACCOUNT_SYSV}; {ACCOUNT_HOST_NET}; {ACCOUNT_TCP}")
}

pub const NOTE_NPROC: &str =
    "RLIMIT_NPROC: counted per uid inside the sandbox's new user namespace";

/// `RLIMIT_CPU` takes whole seconds: round up so the limit is never below the request.
pub fn cpu_seconds(cpu_time: std::time::Duration) -> u64 {
    let s = cpu_time.as_secs();
    if cpu_time.subsec_nanos() > 0 {
        s + 1
    } else {
        s.max(1)
    }
}

/// Queued signals (and POSIX timers, which hold one each) the sandbox may have pending at
/// once. The kernel counts them per user up the user-namespace chain: without a limit of its
/// own a sandbox could take the whole of its caller's (`RLIMIT_SIGPENDING`, about 96,000
/// here), and the caller's other processes and sandboxes would get EAGAIN.
pub const SIGPENDING: u64 = 1024;
/// Bytes of POSIX message queues the sandbox may create, counted the same way against its
/// caller's `RLIMIT_MSGQUEUE` (800 KiB by default): room for one queue of the default size
/// (10 messages of 8 KiB).
pub const MSGQUEUE: u64 = 128 << 10;

/// `value`, or the caller's own hard limit of `resource` when that is lower (lowering is
/// always allowed; raising past it is not).
fn at_most_callers(resource: super::RlimitResource, value: u64) -> u64 {
    nix_resource(resource)
        .and_then(|r| nix::sys::resource::getrlimit(r).ok())
        .map_or(value, |(_, hard)| value.min(hard))
}

/// RLIMIT_CORE's value: the one the kernel aborts a dump for, even to a pipe (see [`rlimits`]).
pub const CORE_NO_DUMP: u64 = 1;

/// [`CORE_NO_DUMP`], which needs a hard limit of at least 1: a root caller whose own hard limit
/// is 0 (`* hard core 0`, `LimitCORE=0`) raises it (CAP_SYS_RESOURCE in the host's user
/// namespace; the sandbox inherits it at the clone, and could not raise it itself). An
/// unprivileged caller cannot: its sandbox keeps 0, as the caller's own processes have it
/// (a crash of theirs reaches a piped core_pattern's helper the same way).
fn core_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_CORE) {
        Ok((_, hard)) if hard >= CORE_NO_DUMP => CORE_NO_DUMP,
        Ok((soft, _))
            if nix::unistd::geteuid().is_root()
                && setrlimit(Resource::RLIMIT_CORE, soft, CORE_NO_DUMP).is_ok() =>
        {
            CORE_NO_DUMP
        }
        Ok((_, hard)) => hard,
        Err(_) => CORE_NO_DUMP,
    }
}

/// What becomes of a core dump in the sandbox, given the RLIMIT_CORE it gets (`core`) and
/// the host's `kernel.core_pattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreDumps {
    /// RLIMIT_CORE is 1: no file is written (less than a page) and a piped pattern's
    /// helper is not started.
    Refused,
    /// RLIMIT_CORE is 0 and the pattern names a file: none is written.
    NoFile,
    /// RLIMIT_CORE is 0 and the pattern pipes to a helper (the pattern): the kernel starts it
    /// for every crash, as root, outside the sandbox.
    ToHelper(String),
}

impl CoreDumps {
    pub fn of(core: u64, pattern: &str) -> CoreDumps {
        let pattern = pattern.trim();
        // Exactly 1: the value the kernel aborts a piped dump for (more lets it through).
        // `@` (Linux 6.16+) hands the dump to a socket's listener, a receiver outside the
        // sandbox like a pipe's helper; that 1 stops it too is assumed, not verified here.
        if core == CORE_NO_DUMP {
            CoreDumps::Refused
        } else if pattern.starts_with('|') || pattern.starts_with('@') {
            CoreDumps::ToHelper(pattern.to_string())
        } else {
            CoreDumps::NoFile
        }
    }

    /// For the result's `isolation.core_dumps`.
    pub fn describe(&self) -> String {
        match self {
            CoreDumps::Refused => {
                "none (RLIMIT_CORE 1: no core file, no core_pattern helper)".into()
            }
            CoreDumps::NoFile => {
                "none (RLIMIT_CORE 0, as the caller's hard limit; kernel.core_pattern writes files)"
                    .into()
            }
            CoreDumps::ToHelper(p) => format!(
                "HANDED TO THE HOST'S HELPER on a crash (kernel.core_pattern `{p}`; RLIMIT_CORE 0, as the caller's hard limit; --allow-degraded core-dumps)"
            ),
        }
    }
}

/// The host's `kernel.core_pattern`; when unreadable, a pipe of unknown name: it may be one,
/// and a run whose crashes it would get is refused unless accepted (fail closed).
pub fn core_pattern() -> String {
    std::fs::read_to_string("/proc/sys/kernel/core_pattern")
        .unwrap_or_else(|e| format!("|? (kernel.core_pattern unreadable: {e})"))
}

/// The rlimits for `backend`: always NOFILE, CORE=1, RTPRIO=0, NICE=0, SIGPENDING and
/// MSGQUEUE (the caller's per-user budgets, which a sandbox must not exhaust), FSIZE and CPU
/// when set; AS and NPROC only when no cgroup enforces memory and pids.
///
/// CORE is 1, not 0: with a `kernel.core_pattern` that pipes to a helper (systemd-coredump,
/// apport), the kernel ignores a limit of 0 and starts the helper, as host root, outside the
/// sandbox's namespaces and limits, for every crash; 1 is the value it aborts the dump for
/// (and below a page, a file dump is not written either). The default seccomp policy keeps
/// the program from changing it. RTPRIO 0 and NICE 0: a caller allowed real-time priority
/// (an audio group's limits.d entry) must not pass it on: SCHED_FIFO threads are not held by
/// cpu.max.
pub fn rlimits(limits: &Limits, backend: Backend) -> Vec<Rlimit> {
    let mut out = vec![
        Rlimit {
            resource: libc::RLIMIT_NOFILE,
            value: limits.open_files,
        },
        Rlimit {
            resource: libc::RLIMIT_CORE,
            value: core_limit(),
        },
        Rlimit {
            resource: libc::RLIMIT_RTPRIO,
            value: 0,
        },
        Rlimit {
            resource: libc::RLIMIT_NICE,
            value: 0,
        },
        Rlimit {
            resource: libc::RLIMIT_SIGPENDING,
            value: at_most_callers(libc::RLIMIT_SIGPENDING, SIGPENDING),
        },
        Rlimit {
            resource: libc::RLIMIT_MSGQUEUE,
            value: at_most_callers(libc::RLIMIT_MSGQUEUE, MSGQUEUE),
        },
    ];
    if let Some(f) = limits.file_size {
        out.push(Rlimit {
            resource: libc::RLIMIT_FSIZE,
            value: f,
        });
    }
    if let Some(t) = limits.cpu_time {
        out.push(Rlimit {
            resource: libc::RLIMIT_CPU,
            value: cpu_seconds(t),
        });
    }
    if backend == Backend::Rlimit {
        if let Some(m) = limits.memory {
            out.push(Rlimit {
                resource: libc::RLIMIT_DATA,
                value: m,
            });
        }
        if let Some(p) = limits.pids {
            out.push(Rlimit {
                resource: libc::RLIMIT_NPROC,
                value: p,
            });
        }
    }
    out
}

pub fn report(value: f64, note: Option<String>) -> LimitReport {
    LimitReport {
        value: Some(value),
        enforcement: Enforcement::Rlimit,
        note,
    }
}

/// The cpu-time entry: always an rlimit, per process.
pub fn cpu_time_report(cpu_time: std::time::Duration) -> LimitReport {
    report(
        cpu_time.as_secs_f64() * 1000.0,
        Some(format!(
            "RLIMIT_CPU = {} s per process (rounded up to whole seconds); not summed over the sandbox's processes",
            cpu_seconds(cpu_time)
        )),
    )
}

/// Sets one resource limit of the calling process: the one setter of the payload's limits and
/// of an OCI container's `process.rlimits`. The error names the resource and the values.
pub fn set(resource: super::RlimitResource, soft: u64, hard: u64) -> Result<(), String> {
    let res = nix_resource(resource).ok_or_else(|| format!("unknown resource {resource}"))?;
    nix::sys::resource::setrlimit(res, soft, hard).map_err(|err| {
        if soft == hard {
            format!("{res:?} = {soft}: {err}")
        } else {
            format!("{res:?} = {soft} (hard {hard}): {err}")
        }
    })
}

/// The rlimit resources nix knows, by number.
pub fn nix_resource(r: super::RlimitResource) -> Option<nix::sys::resource::Resource> {
    use nix::sys::resource::Resource;
    Some(match r {
        libc::RLIMIT_AS => Resource::RLIMIT_AS,
        libc::RLIMIT_CORE => Resource::RLIMIT_CORE,
        libc::RLIMIT_CPU => Resource::RLIMIT_CPU,
        libc::RLIMIT_DATA => Resource::RLIMIT_DATA,
        libc::RLIMIT_FSIZE => Resource::RLIMIT_FSIZE,
        libc::RLIMIT_NOFILE => Resource::RLIMIT_NOFILE,
        libc::RLIMIT_NPROC => Resource::RLIMIT_NPROC,
        libc::RLIMIT_STACK => Resource::RLIMIT_STACK,
        libc::RLIMIT_MEMLOCK => Resource::RLIMIT_MEMLOCK,
        libc::RLIMIT_MSGQUEUE => Resource::RLIMIT_MSGQUEUE,
        libc::RLIMIT_LOCKS => Resource::RLIMIT_LOCKS,
        libc::RLIMIT_NICE => Resource::RLIMIT_NICE,
        libc::RLIMIT_RSS => Resource::RLIMIT_RSS,
        libc::RLIMIT_RTPRIO => Resource::RLIMIT_RTPRIO,
        libc::RLIMIT_RTTIME => Resource::RLIMIT_RTTIME,
        libc::RLIMIT_SIGPENDING => Resource::RLIMIT_SIGPENDING,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn core_dumps_reach_a_helper_unless_the_limit_is_exactly_1() {
        assert_eq!(
            CoreDumps::of(1, "|/lib/systemd/systemd-coredump %P"),
            CoreDumps::Refused
        );
        assert_eq!(CoreDumps::of(u64::MAX, "core"), CoreDumps::NoFile);
        assert!(matches!(
            CoreDumps::of(2, "|/bin/helper"),
            CoreDumps::ToHelper(_)
        ));
        assert!(matches!(
            CoreDumps::of(0, "@/run/coredump.socket"),
            CoreDumps::ToHelper(_)
        ));
        assert_eq!(CoreDumps::of(0, "core\n"), CoreDumps::NoFile);
        assert_eq!(CoreDumps::of(0, ""), CoreDumps::NoFile);
        let to = CoreDumps::of(0, " |/usr/share/apport/apport -p%p\n");
        assert_eq!(
            to,
            CoreDumps::ToHelper("|/usr/share/apport/apport -p%p".into())
        );
        assert!(
            to.describe().contains("`|/usr/share/apport/apport -p%p`"),
            "{}",
            to.describe()
        );
    }

    use super::*;
    use std::time::Duration;

    /// Every memory note the launch can give: caller, network namespace, TCP.
    fn every_memory_note() -> Vec<((bool, bool, TcpUnderWatch), String)> {
        let mut out = Vec::new();
        for root in [false, true] {
            for own_netns in [true, false] {
                for tcp in [
                    TcpUnderWatch::Landlock,
                    TcpUnderWatch::Refused,
                    TcpUnderWatch::Uncounted,
                ] {
                    let k = (root, own_netns, tcp);
                    out.push((k, memory_note(root, own_netns, tcp)));
                }
            }
        }
        out
    }

    /// What follows `ERRNO: ` in `note`, up to the end of that list.
    fn refused_with<'a>(note: &'a str, errno: &str) -> &'a str {
        let head = format!("{errno}: ");
        let at = note
            .find(&head)
            .unwrap_or_else(|| panic!("no {head:?} in {note}"));
        let rest = &note[at + head.len()..];
        &rest[..rest.find(';').unwrap_or(rest.len())]
    }

    const MEMORY_WATCH_TOML: &str = include_str!("../../profiles/seccomp/memory-watch.toml");
    const DEFAULT_TOML: &str = include_str!("../../profiles/seccomp/default.toml");
    const README: &str = include_str!("../../README.md");

    /// The errno denials of a seccomp profile: (syscall, errno, why).
    fn errno_denials(toml_text: &str) -> Vec<(String, String, String)> {
        let v: toml::Value = toml::from_str(toml_text).unwrap();
        let mut out = Vec::new();
        for d in v["deny"].as_array().unwrap() {
            // The policy's defaults: action errno, errno EPERM.
            if d.get("action").and_then(|a| a.as_str()).unwrap_or("errno") != "errno" {
                continue;
            }
            let errno = d
                .get("errno")
                .and_then(|e| e.as_str())
                .unwrap_or("EPERM")
                .to_string();
            let why = d["why"].as_str().unwrap().to_string();
            let names: Vec<String> = match &d["syscall"] {
                toml::Value::String(n) => vec![n.clone()],
                toml::Value::Array(a) => a.iter().map(|n| n.as_str().unwrap().into()).collect(),
                other => panic!("syscall {other:?}"),
            };
            for n in names {
                out.push((n, errno.clone(), why.clone()));
            }
        }
        out
    }

    /// How the note names what the memory watch's layer refuses (None: refused in every run,
    /// not by the watch).
    fn named_as(syscall: &str, why: &str) -> Option<String> {
        Some(match syscall {
            "inotify_init" | "inotify_init1" => return None,
            "clone" | "unshare" => "unsharing the fd table".into(),
            "fcntl" => "F_SETPIPE_SZ".into(),
            "socket" | "socketpair" => "sockets but unix, TCP, UDP".into(),
            // One option or flag each, which its reason starts with.
            "setsockopt" | "sendto" | "sendmmsg" | "sendmsg" => {
                why.split_whitespace().next().unwrap().into()
            }
            other => other.into(),
        })
    }

    #[test]
    fn the_memory_note_is_short_and_names_every_call_the_watch_refuses() {
        let refusals = errno_denials(MEMORY_WATCH_TOML);
        assert!(refusals.len() >= 20, "{refusals:?}");
        let always = errno_denials(DEFAULT_TOML);
        for ((root, own_netns, tcp), note) in every_memory_note() {
            let k = (root, own_netns, tcp);
            // A fifth of the 2.6 KB it was: it is in every result, run after run.
            let bound = match (own_netns, tcp) {
                (true, TcpUnderWatch::Landlock) => 560,
                _ => 680,
            };
            assert!(note.len() <= bound, "{k:?}: {} chars: {note}", note.len());
            for (syscall, errno, why) in &refusals {
                match named_as(syscall, why) {
                    Some(name) => assert!(
                        refused_with(&note, errno).contains(&name),
                        "{k:?}: {syscall} ({name}) not under {errno}: {note}"
                    ),
                    None => assert!(
                        always.iter().any(|(s, e, _)| s == syscall && e == errno),
                        "{syscall} is left out of the note as refused in every run, but the default profile does not refuse it"
                    ),
                }
            }
            for said in [
                "RLIMIT_DATA per process",
                "polled every 20-50 ms",
                "not a hard cap",
                "one interval",
                "shared anonymous mappings count at full length",
                "/dev/zero unmappable",
                "`cordon doctor`",
            ] {
                assert!(note.contains(said), "{k:?}: no {said:?}: {note}");
            }
            assert!(
                note.ends_with(&format!("README \"{README_SECTION}\"")),
                "{k:?}: {note}"
            );
            assert_eq!(
                note.contains(NOTE_SYSV_SET),
                root,
                "{k:?}: shmmax/shmall are set for the host's root alone: {note}"
            );
            assert_eq!(note.contains(NOTE_SYSV_UNSET), !root, "{k:?}: {note}");
            assert_eq!(note.contains(NOTE_HOST_NET), !own_netns, "{k:?}: {note}");
            assert_eq!(
                note.contains(NOTE_TCP_REFUSED),
                tcp == TcpUnderWatch::Refused,
                "{k:?}: {note}"
            );
            assert_eq!(
                note.contains(NOTE_TCP_UNCOUNTED),
                tcp == TcpUnderWatch::Uncounted,
                "{k:?}: {note}"
            );
        }
        // The no-tcp layer's refusal, in its own words.
        let refused = memory_note(false, true, TcpUnderWatch::Refused);
        for (syscall, errno, _) in errno_denials(include_str!("../../profiles/seccomp/no-tcp.toml"))
        {
            assert_eq!(syscall, "socket");
            assert!(
                refused_with(&refused, &errno).contains("TCP sockets"),
                "{refused}"
            );
        }
    }

    #[test]
    fn the_whole_account_is_in_doctor_and_the_readme_section_the_note_names() {
        let heading = format!("\n### {README_SECTION}\n");
        let at = README
            .find(&heading)
            .unwrap_or_else(|| panic!("README has no section {heading:?}"));
        let section = &README[at + heading.len()..];
        // As words, without the code marks (the README wraps its lines anywhere).
        let section = section[..section.find("\n#").unwrap_or(section.len())]
            .replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let section = section.as_str();
        let account = memory_account();
        for (syscall, errno, why) in errno_denials(MEMORY_WATCH_TOML) {
            let name = |readme: bool| match syscall.as_str() {
                "inotify_init1" => "inotify_init".to_string(),
                "fcntl" => "F_SETPIPE_SZ".to_string(),
                // The sockets allowed, by family (README) or not (doctor).
                "socket" | "socketpair" if readme => "AF_UNIX".to_string(),
                "socket" | "socketpair" => "other socket families".to_string(),
                "setsockopt" | "sendto" | "sendmmsg" | "sendmsg" => {
                    why.split_whitespace().next().unwrap().to_string()
                }
                s => s.to_string(),
            };
            for (what, text, name) in [
                ("README", section, name(true)),
                ("doctor", account.as_str(), name(false)),
            ] {
                assert!(text.contains(&name), "{what}: no {name} ({syscall})");
                assert!(text.contains(&errno), "{what}: no {errno} ({syscall})");
            }
        }
        // Every variant of the note, at length.
        for part in [ACCOUNT_WATCH, ACCOUNT_SYSV, ACCOUNT_HOST_NET, ACCOUNT_TCP] {
            assert!(account.contains(part));
        }
        for said in [
            "kernel.shmmax",
            "--allow-degraded socket-memory",
            "TCP sockets answer EACCES",
            "sandbox_error",
        ] {
            assert!(account.contains(said), "no {said:?}: {account}");
            assert!(section.contains(said), "README section: no {said:?}");
        }
    }

    #[test]
    fn the_setter_names_the_resource_and_values_it_could_not_set() {
        use nix::sys::resource::{Resource, getrlimit};
        let (soft, hard) = getrlimit(Resource::RLIMIT_CORE).unwrap();
        // Another soft value (within the hard limit, which an unprivileged test may not raise)
        let other = if soft == 0 { hard.min(4096) } else { 0 };
        assert_ne!(
            other, soft,
            "RLIMIT_CORE soft and hard are both 0: nothing to change"
        );
        set(libc::RLIMIT_CORE, other, hard).unwrap();
        assert_eq!(getrlimit(Resource::RLIMIT_CORE).unwrap(), (other, hard));
        set(libc::RLIMIT_CORE, soft, hard).unwrap();
        assert_eq!(getrlimit(Resource::RLIMIT_CORE).unwrap(), (soft, hard));
        // A soft limit above the hard one: EINVAL, and nothing changes.
        let e = set(libc::RLIMIT_CORE, 2, 1).unwrap_err();
        assert!(e.starts_with("RLIMIT_CORE = 2 (hard 1): EINVAL"), "{e}");
        assert_eq!(getrlimit(Resource::RLIMIT_CORE).unwrap(), (soft, hard));
        assert_eq!(set(999, 1, 1).unwrap_err(), "unknown resource 999");
    }

    fn find(v: &[Rlimit], r: crate::limits::RlimitResource) -> Option<u64> {
        v.iter().find(|x| x.resource == r).map(|x| x.value)
    }

    #[test]
    fn cpu_seconds_round_up() {
        assert_eq!(cpu_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(cpu_seconds(Duration::from_secs(3)), 3);
        assert_eq!(cpu_seconds(Duration::from_millis(1)), 1);
        assert_eq!(
            cpu_seconds(Duration::ZERO),
            1,
            "RLIMIT_CPU 0 would kill at once"
        );
    }

    #[test]
    fn always_nofile_core_fsize_cpu_and_fallbacks_only_without_cgroup() {
        let limits = Limits {
            cpu_time: Some(Duration::from_millis(2500)),
            ..Limits::default()
        };
        let with_cg = rlimits(&limits, Backend::CgroupV1);
        assert_eq!(find(&with_cg, libc::RLIMIT_NOFILE), Some(1024));
        // 1, not 0: the value the kernel aborts a piped core dump for.
        assert_eq!(find(&with_cg, libc::RLIMIT_CORE), Some(CORE_NO_DUMP));
        assert_eq!(find(&with_cg, libc::RLIMIT_RTPRIO), Some(0));
        assert_eq!(find(&with_cg, libc::RLIMIT_NICE), Some(0));
        assert_eq!(find(&with_cg, libc::RLIMIT_SIGPENDING), Some(SIGPENDING));
        assert_eq!(find(&with_cg, libc::RLIMIT_MSGQUEUE), Some(MSGQUEUE));
        assert_eq!(find(&with_cg, libc::RLIMIT_FSIZE), Some(256 << 20));
        assert_eq!(find(&with_cg, libc::RLIMIT_CPU), Some(3));
        assert_eq!(find(&with_cg, libc::RLIMIT_DATA), None);
        assert_eq!(find(&with_cg, libc::RLIMIT_NPROC), None);

        let without = rlimits(&limits, Backend::Rlimit);
        assert_eq!(find(&without, libc::RLIMIT_DATA), Some(512 << 20));
        assert_eq!(find(&without, libc::RLIMIT_NPROC), Some(64));

        let none = Limits {
            file_size: None,
            memory: None,
            pids: None,
            ..Limits::default()
        };
        let v = rlimits(&none, Backend::Rlimit);
        assert_eq!(v.len(), 6, "{v:?}");
    }
}

//! Real tests: the compiled default policy installed in a CHILD process (a filter cannot be
//! removed, so never in the test process itself). Each test re-executes the test binary with
//! `--exact <its own name>` and `CORDON_SECCOMP_TEST_CHILD` set; the child half installs the
//! policy, makes the calls, prints one line per probe and reports through its exit status.
//! The parent half asserts on that status and output.
//!
//! The probes (src/sys/seccomp_probe.rs) are chosen so that the kernel alone answers them
//! differently from the filter; `probes_differ_without_the_filter` checks exactly that, so a
//! policy that silently stopped matching would make the other tests fail.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

use nix::errno::Errno;

use crate::sys::seccomp_probe as probe;

const CHILD_ENV: &str = "CORDON_SECCOMP_TEST_CHILD";

/// CLONE_NEWTIME, include/uapi/linux/sched.h (not in libc 0.2 for glibc targets).
const CLONE_NEWTIME: u64 = 0x80;
/// READ_IMPLIES_EXEC, include/uapi/linux/personality.h.
const READ_IMPLIES_EXEC: u64 = 0x0040_0000;
/// x32 getpid: `__X32_SYSCALL_BIT | 39`.
const X32_GETPID: i64 = 0x4000_0000 | 39;

const NAMESPACE_FLAGS: [(&str, u64); 8] = [
    ("NEWUSER", libc::CLONE_NEWUSER as u64),
    ("NEWNS", libc::CLONE_NEWNS as u64),
    ("NEWPID", libc::CLONE_NEWPID as u64),
    ("NEWNET", libc::CLONE_NEWNET as u64),
    ("NEWIPC", libc::CLONE_NEWIPC as u64),
    ("NEWUTS", libc::CLONE_NEWUTS as u64),
    ("NEWCGROUP", libc::CLONE_NEWCGROUP as u64),
    ("NEWTIME", CLONE_NEWTIME),
];

/// The full libtest name of a test function in this module (libtest drops the crate name).
macro_rules! test_name {
    ($f:ident) => {
        concat!(module_path!(), "::", stringify!($f))
            .split_once("::")
            .expect("module path has a crate prefix")
            .1
    };
}

/// Re-runs one test of this binary as a child with `CHILD_ENV` set and stdin on /dev/null.
fn rerun_as_child(test: &str) -> Output {
    let exe = std::env::current_exe().expect("current_exe");
    let child = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, with whatever its probes start: killed together.
        .process_group(0)
        .spawn()
        .expect("re-exec the test binary");
    // A wrong filter can leave a probe blocked or spinning: bounded, so that it fails the test
    // instead of stalling the suite. The output is read to its end, which a process the
    // child started may hold open after the child itself has exited.
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(out) => out.expect("wait for the re-run test binary"),
        Err(_) => {
            // The group keeps its id while any member lives (even the child unreaped, as
            // wait_with_output reaps only after the output ends), so this reaches no other.
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            panic!("child {test} or a process it started was still running after 120 s (killed)");
        }
    };
    eprintln!(
        "child {test}: {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Child side: compile, no_new_privs, install. Exits 3 if any step fails.
fn install_default() {
    let compiled = super::compile_builtin("default").unwrap_or_else(|e| child_exit(3, &e));
    nix::sys::prctl::set_no_new_privs().unwrap_or_else(|e| child_exit(3, &e));
    super::install(&compiled).unwrap_or_else(|e| child_exit(3, &e));
    say("installed");
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn child_exit(code: i32, why: &dyn std::fmt::Display) -> ! {
    say(&format!("child failed: {why}"));
    std::process::exit(code)
}

/// No core files from the deliberate SIGSYS kills.
fn no_core_dumps() {
    use nix::sys::resource::{Resource, setrlimit};
    setrlimit(Resource::RLIMIT_CORE, 0, 0).unwrap_or_else(|e| child_exit(3, &e));
}

// ---- the probe table ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// The filter must answer this errno; without it the kernel answers something else.
    Denied(Errno),
    /// The filter must let the call through: it succeeds (`None`) or fails with the kernel's
    /// own errno, the same with or without the filter.
    Allowed(Option<Errno>),
}

struct Probe {
    name: String,
    run: Box<dyn Fn() -> Result<i64, Errno>>,
    want: Want,
    /// Whether the unfiltered answer depends on host settings or privileges (so the control
    /// test only reports, rather than fails, when it already equals the filtered one).
    host_dependent: bool,
}

fn p(
    name: impl Into<String>,
    want: Want,
    host_dependent: bool,
    run: impl Fn() -> Result<i64, Errno> + 'static,
) -> Probe {
    Probe {
        name: name.into(),
        run: Box::new(run),
        want,
        host_dependent,
    }
}

fn probes() -> Vec<Probe> {
    use Want::*;
    let eperm = Denied(Errno::EPERM);
    let ok = Allowed(None);
    let mut v = Vec::new();
    for (flag_name, flag) in NAMESPACE_FLAGS {
        // CLONE_PTRACE is unknown to unshare: EINVAL from the kernel alone.
        v.push(p(
            format!("unshare(CLONE_{flag_name}|CLONE_PTRACE)"),
            eperm,
            false,
            move || probe::unshare(flag | libc::CLONE_PTRACE as u64),
        ));
        // CLONE_THREAD without CLONE_SIGHAND: EINVAL from the kernel alone.
        v.push(p(
            format!("clone(CLONE_{flag_name}|CLONE_THREAD)"),
            eperm,
            false,
            move || probe::clone_invalid_thread(flag),
        ));
    }
    v.extend([
        p(
            "clone3(NULL, 0)",
            Denied(Errno::ENOSYS),
            false,
            probe::clone3_null,
        ),
        p(
            "mount(tmpfs on a missing dir)",
            eperm,
            false,
            probe::mount_nonexistent,
        ),
        p(
            "ptrace(PTRACE_DETACH, self)",
            eperm,
            false,
            probe::ptrace_detach_self,
        ),
        p(
            "io_uring_setup(1, NULL)",
            eperm,
            true,
            probe::io_uring_setup_null,
        ),
        p("bpf(bogus command)", eperm, true, probe::bpf_bogus_command),
        p("ioctl(0, TIOCSTI)", eperm, false, || {
            probe::ioctl_with_byte(0, libc::TIOCSTI as u64)
        }),
        p("ioctl(0, TIOCSTI | 1<<32)", eperm, false, || {
            probe::ioctl_with_byte(0, libc::TIOCSTI as u64 | 1 << 32)
        }),
        p("ioctl(0, TIOCLINUX | 1<<32)", eperm, false, || {
            probe::ioctl_with_byte(0, libc::TIOCLINUX as u64 | 1 << 32)
        }),
        p(
            "ioctl(0, TCGETS)",
            Allowed(Some(Errno::ENOTTY)),
            false,
            || probe::ioctl_with_byte(0, libc::TCGETS as u64),
        ),
        p("socket(AF_NETLINK)", eperm, false, || {
            probe::socket_dgram(libc::AF_NETLINK as u64)
        }),
        p("socket(AF_NETLINK | 1<<32)", eperm, false, || {
            probe::socket_dgram(libc::AF_NETLINK as u64 | 1 << 32)
        }),
        p("socket(AF_PACKET)", eperm, true, || {
            probe::socket_dgram(libc::AF_PACKET as u64)
        }),
        p("socket(AF_INET)", ok, false, || {
            probe::socket_dgram(libc::AF_INET as u64)
        }),
        p("socket(AF_UNIX)", ok, false, || {
            probe::socket_dgram(libc::AF_UNIX as u64)
        }),
        p("personality(READ_IMPLIES_EXEC)", eperm, false, || {
            probe::personality(READ_IMPLIES_EXEC)
        }),
        p("personality(0xffffffff) query", ok, false, || {
            probe::personality(0xffff_ffff)
        }),
        p("personality(PER_LINUX)", ok, false, || {
            probe::personality(0)
        }),
        p("syscall(-1)", Allowed(Some(Errno::ENOSYS)), false, || {
            probe::no_arg_syscall(-1)
        }),
        p("getpid", ok, false, || {
            Ok(i64::from(nix::unistd::getpid().as_raw()))
        }),
        p("fork + _exit + waitpid", ok, false, || {
            probe::fork_and_reap().map(i64::from)
        }),
        p(
            "std::thread::spawn (clone3 → clone fallback)",
            ok,
            false,
            || std::thread::spawn(|| 7i64).join().map_err(|_| Errno::EIO),
        ),
        p(
            "posix_spawn /bin/true (clone3 → clone fallback)",
            ok,
            false,
            || {
                let st = Command::new("/bin/true")
                    .status()
                    .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
                if st.success() {
                    Ok(0)
                } else {
                    Err(Errno::ECHILD)
                }
            },
        ),
        // Last: unfiltered, these may succeed and change the (child) process's namespaces.
        p("unshare(CLONE_NEWUSER)", eperm, true, || {
            probe::unshare(libc::CLONE_NEWUSER as u64)
        }),
    ]);
    v
}

fn matches(want: Want, got: Result<i64, Errno>) -> bool {
    match (want, got) {
        (Want::Denied(e), Err(g)) => e == g,
        (Want::Allowed(None), Ok(_)) => true,
        (Want::Allowed(Some(e)), Err(g)) => e == g,
        _ => false,
    }
}

// ---- the tests ----------------------------------------------------------------------------

#[test]
fn default_policy_denies_and_allows_in_a_real_child() {
    if is_child() {
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            child_exit(3, &"stdin must not be a terminal (TIOCSTI probes)");
        }
        install_default();
        let mut failed = 0;
        for probe in probes() {
            let got = (probe.run)();
            let good = matches(probe.want, got);
            failed += usize::from(!good);
            let verdict = if good { "ok  " } else { "FAIL" };
            say(&format!(
                "{verdict} {}: got {got:?}, want {:?}",
                probe.name, probe.want
            ));
        }
        std::process::exit(if failed == 0 { 0 } else { 1 });
    }
    let out = rerun_as_child(test_name!(default_policy_denies_and_allows_in_a_real_child));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("installed"), "the policy was not installed");
    assert_eq!(out.status.code(), Some(0), "some probe failed:\n{stdout}");
    assert_eq!(stdout.matches("ok  ").count(), probes().len());
}

#[test]
fn probes_differ_without_the_filter() {
    // Control: the same probes with NO filter. Every `Denied` probe must get a different
    // answer from the kernel alone (else the test above could not fail), except host-dependent
    // ones, which are only reported; every `Allowed` probe gets the same answer.
    if is_child() {
        no_core_dumps();
        let mut failed = 0;
        for probe in probes() {
            let got = (probe.run)();
            let line = match probe.want {
                Want::Denied(_) if matches(probe.want, got) && probe.host_dependent => "note",
                Want::Denied(_) if matches(probe.want, got) => "FAIL",
                Want::Denied(_) => "ok  ",
                Want::Allowed(_) if matches(probe.want, got) => "ok  ",
                Want::Allowed(_) => "FAIL",
            };
            failed += usize::from(line == "FAIL");
            say(&format!("{line} {}: unfiltered got {got:?}", probe.name));
        }
        // The kill probes must survive without the filter on this host (IA-32 emulation on,
        // x32 answered with ENOSYS or a pid), or the kill tests prove nothing.
        let x32 = probe::no_arg_syscall(X32_GETPID);
        let pid = i64::from(nix::unistd::getpid().as_raw());
        let int80 = probe::int80_getpid();
        say(&format!(
            "x32 getpid unfiltered: {x32:?}; int 0x80 getpid: {int80} (pid {pid})"
        ));
        if !(x32 == Err(Errno::ENOSYS) || x32 == Ok(pid)) || int80 != pid {
            failed += 1;
            say("FAIL kill probes do not behave as expected without the filter");
        }
        std::process::exit(if failed == 0 { 0 } else { 1 });
    }
    let out = rerun_as_child(test_name!(probes_differ_without_the_filter));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "control run:\n{stdout}");
    assert!(!stdout.contains("FAIL"));
}

/// Child side of the kill tests: install, then make one call that must kill the process.
fn must_be_killed(call: impl FnOnce() -> String) -> ! {
    no_core_dumps();
    install_default();
    let result = call();
    say(&format!("survived: {result}"));
    std::process::exit(0)
}

fn assert_killed_by_sigsys(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("installed"),
        "the policy was not installed:\n{stdout}"
    );
    assert!(
        !stdout.contains("survived"),
        "the call went through:\n{stdout}"
    );
    assert_eq!(out.status.signal(), Some(libc::SIGSYS), "{:?}", out.status);
}

#[test]
fn x32_syscall_number_kills_the_process() {
    if is_child() {
        must_be_killed(|| format!("{:?}", probe::no_arg_syscall(X32_GETPID)));
    }
    let out = rerun_as_child(test_name!(x32_syscall_number_kills_the_process));
    assert_killed_by_sigsys(&out);
}

#[test]
fn i386_int80_syscall_kills_the_process() {
    if is_child() {
        must_be_killed(|| probe::int80_getpid().to_string());
    }
    let out = rerun_as_child(test_name!(i386_int80_syscall_kills_the_process));
    assert_killed_by_sigsys(&out);
}

//! `cordon doctor`: which mechanisms this host offers, and the fix for each missing one.
//! Also the hints that launcher errors carry. Every check is a real probe where one is
//! possible (a throw-away child creates the namespaces and mounts), not a guess from files.

use crate::sys::{self, CloneResult};
use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sys::wait::{WaitStatus, waitpid};
use serde::Serialize;

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): one is
/// still made, but without capabilities in it, so its first mount fails with EPERM.
pub fn apparmor_restricts_userns() -> bool {
    read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
}

/// The likely cause and fix when creating the sandbox's namespaces fails with `errno`.
pub fn userns_hint(errno: Errno) -> String {
    let mut causes = Vec::new();
    if read_trim("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        causes.push("kernel.unprivileged_userns_clone=0; run `sysctl -w kernel.unprivileged_userns_clone=1` or run as root".to_string());
    }
    if read_trim("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        causes.push(
            "user.max_user_namespaces=0; run `sysctl -w user.max_user_namespaces=15000`"
                .to_string(),
        );
    }
    if apparmor_restricts_userns() {
        causes.push("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1); add an AppArmor profile granting `userns` to cordon, or run `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`".to_string());
    }
    if errno == Errno::ENOSPC {
        causes.push("the per-user namespace count is exhausted (user.max_user_namespaces or max_pid_namespaces); raise it with sysctl".to_string());
    }
    if errno == Errno::EINVAL {
        causes.push("the process is multi-threaded or the kernel lacks a namespace type (CONFIG_USER_NS, CONFIG_PID_NS, CONFIG_NET_NS)".to_string());
    }
    if causes.is_empty() && errno == Errno::EPERM && under_seccomp_filter() {
        causes.push("no sysctl forbids them, and cordon itself runs under a seccomp filter, which is most likely what refuses them (Docker's default profile does for a container without CAP_SYS_ADMIN): run cordon's container with `--security-opt seccomp=unconfined` (or a profile that allows clone, unshare and mount with namespace flags), or run cordon on the host".to_string());
    }
    if causes.is_empty() {
        "; run `cordon doctor` to see which mechanism the host blocks".to_string()
    } else {
        format!("; {}", causes.join("; "))
    }
}

/// Whether this process runs under a seccomp filter (`Seccomp: 2` in /proc/self/status), as
/// a container's processes do: a refusal no sysctl explains is then most likely the filter's.
fn under_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

/// One mechanism: whether cordon can use it here, what was seen, and how to fix it.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// A missing mechanism that makes `cordon exec` refuse to run (unless downgraded).
    pub required: bool,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// What the mechanism means for a run, where a line cannot say it (the rlimit fallback's
    /// memory watch: every call it refuses and why, what it counts and what it cannot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// True when every required mechanism works: `cordon exec` will run with full isolation.
    pub ready: bool,
    pub uid: u32,
    pub kernel: String,
    pub checks: Vec<Check>,
    pub limits: crate::limits::Probe,
}

const NS_FLAGS: &[(&str, libc::c_int)] = &[
    ("user", libc::CLONE_NEWUSER),
    ("pid", libc::CLONE_NEWPID),
    ("mount", libc::CLONE_NEWNS),
    ("network", libc::CLONE_NEWNET),
    ("ipc", libc::CLONE_NEWIPC),
    ("uts", libc::CLONE_NEWUTS),
    ("cgroup", libc::CLONE_NEWCGROUP),
];

/// Exit codes of the probe child.
const PROBE_PRIVATE: i32 = 10;
const PROBE_TMPFS: i32 = 11;
const PROBE_PROC: i32 = 12;
const PROBE_NO_STAGE: i32 = 13;
const PROBE_HOSTNAME: i32 = 14;

/// Clones a child with `flags`; the child runs `body` and exits with its code.
fn probe_clone(flags: libc::c_int, body: fn() -> i32) -> Result<i32, Errno> {
    match sys::clone_namespaces(flags)? {
        CloneResult::Child => sys::exit_now(body()),
        CloneResult::Parent(pid) => loop {
            match waitpid(pid, None) {
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
                Ok(WaitStatus::Exited(_, c)) => return Ok(c),
                Ok(_) => return Ok(-1),
            }
        },
    }
}

fn mount_probe() -> i32 {
    if mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .is_err()
    {
        return PROBE_PRIVATE;
    }
    match mount(
        Some("tmpfs"),
        "/tmp",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("size=16k"),
    ) {
        Ok(()) => {}
        Err(Errno::ENOENT) => return PROBE_NO_STAGE,
        Err(_) => return PROBE_TMPFS,
    }
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if mount(Some("proc"), "/tmp", Some("proc"), flags, None::<&str>).is_err() {
        return PROBE_PROC;
    }
    // init names the sandbox's UTS namespace (--hostname).
    if nix::unistd::sethostname("sandbox").is_err() {
        return PROBE_HOSTNAME;
    }
    0
}

const PROBE_OVERLAY_NODEV: i32 = 21;
const PROBE_OVERLAY_REFUSED: i32 = 22;
const PROBE_OVERLAY_OTHER: i32 = 23;

/// What the launcher does for every host directory: a read-only overlay of /usr with an empty
/// second layer, mounted inside a new user namespace.
fn overlay_probe() -> i32 {
    let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
    if mount(None::<&str>, "/", None::<&str>, private, None::<&str>).is_err() {
        return PROBE_PRIVATE;
    }
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    match mount(
        Some("tmpfs"),
        "/tmp",
        Some("tmpfs"),
        flags,
        Some("size=16k"),
    ) {
        Ok(()) => {}
        Err(Errno::ENOENT) => return PROBE_NO_STAGE,
        Err(_) => return PROBE_TMPFS,
    }
    // No uid is mapped in this probe, so nothing can be created: the fresh, empty /tmp is
    // the empty layer, and the overlay goes over it.
    match mount(
        Some("overlay"),
        "/tmp",
        Some("overlay"),
        MsFlags::MS_RDONLY | flags,
        Some("lowerdir=/usr:/tmp"),
    ) {
        Ok(()) => 0,
        Err(Errno::ENODEV) => PROBE_OVERLAY_NODEV,
        Err(Errno::EPERM | Errno::EINVAL) => PROBE_OVERLAY_REFUSED,
        Err(_) => PROBE_OVERLAY_OTHER,
    }
}

fn overlay_check() -> Check {
    let degrade = "or run with `--allow-degraded overlay` to bind host directories instead (file locks on them are then shared with other sandboxes and the host; the result says so)";
    let (ok, detail, fix) = match probe_clone(libc::CLONE_NEWUSER | libc::CLONE_NEWNS, overlay_probe) {
        Ok(0) => (true, "read-only overlays of host directories mount in a user namespace (file locks stay private to each sandbox)".to_string(), None),
        Ok(PROBE_OVERLAY_NODEV) => (false, "this kernel has no overlay filesystem".to_string(), Some(format!("load it: `modprobe overlay` as root (add `overlay` to /etc/modules to keep it), {degrade}"))),
        Ok(PROBE_OVERLAY_REFUSED) => (false, "this kernel refuses overlayfs mounts in a user namespace (Linux 5.11 or later allows them)".to_string(), Some(format!("upgrade to Linux 5.11 or later, {degrade}"))),
        Ok(PROBE_NO_STAGE) => (false, "there is no /tmp to mount the overlay probe's tmpfs on (see the namespaces check above)".to_string(), Some("fix the namespaces check above first".to_string())),
        Ok(PROBE_PRIVATE | PROBE_TMPFS) => (false, "the overlay probe could not make the mount namespace it mounts in (see the namespaces check above)".to_string(), Some("fix the namespaces check above first".to_string())),
        Ok(code) => (false, format!("the overlay probe failed (code {code})"), Some(format!("see the namespaces check above, {degrade}"))),
        Err(e) => (false, format!("cannot create a user and mount namespace to probe overlays ({e})"), Some("see the namespaces check above".to_string())),
    };
    Check {
        name: "overlay",
        ok,
        required: true,
        detail,
        fix,
        explanation: None,
    }
}

/// The namespaces a run's clone and init make; the network namespace has a check of its own,
/// made as a run makes it ([`network_namespace_check`]).
fn namespace_checks(checks: &mut Vec<Check>) {
    let all = NS_FLAGS
        .iter()
        .filter(|(_, f)| *f != libc::CLONE_NEWNET)
        .fold(0, |a, (_, f)| a | f);
    match probe_clone(all, mount_probe) {
        Ok(0) => checks.push(Check {
            name: "namespaces",
            ok: true,
            required: true,
            detail: "user, pid, mount, ipc, uts and cgroup namespaces can be created; tmpfs and proc mount inside them, and the hostname can be set".into(),
            fix: None,
            explanation: None,
        }),
        Ok(code) => {
            let (what, fix) = match code {
                PROBE_PRIVATE => ("cannot make / private in a new mount namespace", "the host (often a container) forbids mount propagation changes; run cordon on the host or in a privileged container"),
                PROBE_TMPFS => ("cannot mount tmpfs in a new user namespace", "the host forbids mounts in user namespaces (a container runtime's seccomp/AppArmor profile?); run with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined` or on the host"),
                PROBE_PROC => ("cannot mount a new /proc", "/proc is partly overmounted on this host (as in some containers), which makes the kernel refuse a new proc mount; run cordon on the host, or unmask /proc for its container (podman: `--security-opt unmask=ALL`; Docker: `--security-opt systempaths=unconfined`)"),
                PROBE_NO_STAGE => ("there is no /tmp directory, over which cordon mounts the sandbox's root in a mount namespace of its own (the system's /tmp is untouched)", "create it: `mkdir -m 1777 /tmp` (for a container: `--tmpfs /tmp`)"),
                PROBE_HOSTNAME if under_seccomp_filter() => ("cannot set the hostname in a new UTS namespace, although the probe holds the capability it asks for: most likely the seccomp filter that cordon itself runs under refuses sethostname (a container runtime's default profile allows it only to a container given CAP_SYS_ADMIN)", "run cordon's container with `--security-opt seccomp=unconfined` (or a profile that allows sethostname), or run cordon on the host"),
                PROBE_HOSTNAME => ("cannot set the hostname in a new UTS namespace, although the probe holds the capability it asks for (a security module refuses it?)", "check the host's security modules (SELinux, AppArmor) for a rule on sethostname, or run cordon where they allow it"),
                _ => ("the namespace probe failed", "run `cordon doctor` as the same user as cordon exec"),
            };
            checks.push(Check { name: "namespaces", ok: false, required: true, detail: what.into(), fix: Some(fix.into()), explanation: None });
        }
        Err(errno) => {
            // Find which namespace type is refused.
            let mut refused = Vec::new();
            for (name, flag) in NS_FLAGS.iter().filter(|(_, f)| *f != libc::CLONE_NEWNET) {
                let f = if *flag == libc::CLONE_NEWUSER { *flag } else { flag | libc::CLONE_NEWUSER };
                if probe_clone(f, || 0).is_err() {
                    refused.push(*name);
                }
            }
            checks.push(Check {
                name: "namespaces",
                ok: false,
                required: true,
                detail: format!("cannot create namespaces ({errno}); refused: {}", refused.join(", ")),
                fix: Some(userns_hint(errno).trim_start_matches("; ").to_string()),
                explanation: None,
            });
        }
    }
}

/// What gives a caller left with the rlimit backend exact limits: a delegated cgroup v2
/// subtree, which a host whose controllers are on cgroup v1 cannot give anyone.
fn rlimit_fallback_fix(version: crate::limits::CgroupVersion) -> String {
    use crate::limits::CgroupVersion;
    match version {
        CgroupVersion::Hybrid | CgroupVersion::V1 => format!(
            "for exact memory and CPU limits, {}",
            crate::limits::V1_HOST_UNPRIVILEGED
        ),
        _ => "for exact memory and CPU limits, run with a delegated cgroup v2 subtree (in a systemd login session cordon asks the user manager for one itself; or `systemd-run --user --scope -p Delegate=yes cordon ...`) or as root".into(),
    }
}

/// The rlimit fallback's `--memory`, in full: what each result's memory note says in brief.
fn memory_watch_explanation() -> String {
    format!(
        "--memory without a cgroup (each result's limits.memoryBytes.note says it in brief; the README's section \"{}\" has it at length): {}",
        crate::limits::MEMORY_WATCH_README,
        crate::limits::memory_account()
    )
}

/// `text` in lines of at most `width` characters (a longer word keeps a line of its own),
/// each after `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Which ids of the caller's namespace the sandbox's uid and gid map to (launch::ids): a
/// root caller's own per-run ids, the caller's own, or a refusal (root of a namespace whose
/// only id is its parent's root).
fn sandbox_ids_check(ids: Result<crate::launch::HostIds, crate::launch::IdsError>) -> Check {
    use crate::launch::HostIds;
    let (ok, detail, fix) = match ids {
        Ok(HostIds::Own {
            uid,
            gid,
            host_root: true,
        }) => (
            true,
            format!(
                "the sandbox's uid and gid 1000 map to host ids of this run's own ({uid}:{gid} for this process: 2,000,000,000 + cordon's pid), never 0"
            ),
            None,
        ),
        Ok(HostIds::Own { uid, gid, .. }) => (
            true,
            format!(
                "root of a nested user namespace: the sandbox's uid and gid 1000 map to {uid}:{gid} of its range (another per run), never 0"
            ),
            None,
        ),
        Ok(HostIds::Caller { uid, gid }) => (
            true,
            format!("the sandbox's uid and gid 1000 map to the caller's own ids ({uid}:{gid})"),
            None,
        ),
        Err(e) => (false, e.what, Some(e.fix.to_string())),
    };
    Check {
        name: "sandbox-ids",
        ok,
        required: true,
        detail,
        fix,
        explanation: None,
    }
}

/// The sandbox's network namespace, made as a run makes it: a helper of cordon's joins the
/// sandbox's new user namespace and makes it there (see launch::netns), which a host may
/// refuse where a clone of all the namespaces at once passes.
fn network_namespace_check() -> Check {
    match crate::launch::network_namespace_probe() {
        Ok(()) => Check {
            name: "network-namespace",
            ok: true,
            required: true,
            detail: "a network namespace can be made in a new user namespace by a process that joins it, with `lo` up (as each run makes its own)".into(),
            fix: None,
            explanation: None,
        },
        Err(f) => Check {
            name: "network-namespace",
            ok: false,
            required: true,
            detail: format!("cannot {}: {}", f.step, f.cause),
            fix: Some(f.fix),
            explanation: None,
        },
    }
}

/// Whether a crash in a sandbox could start the host's core-dump helper: a piped
/// `kernel.core_pattern` is stopped only by RLIMIT_CORE 1, which needs a hard limit of 1 or
/// more (`hard`), or the right to raise it (`can_raise`: root with CAP_SYS_RESOURCE).
fn core_dump_check(pattern: &str, hard: u64, can_raise: bool) -> Check {
    let pattern = pattern.trim();
    let piped = pattern.starts_with('|');
    let ok = !piped || hard >= crate::limits::CORE_NO_DUMP || can_raise;
    Check {
        name: "core-dumps",
        ok,
        required: true,
        detail: if !piped {
            format!("kernel.core_pattern `{pattern}` writes files; a sandbox's RLIMIT_CORE (1, or the caller's hard limit 0) writes none")
        } else if ok {
            format!("kernel.core_pattern pipes to `{pattern}`; a sandbox's RLIMIT_CORE 1 keeps its crashes from starting it")
        } else {
            format!("kernel.core_pattern pipes to `{pattern}`, which the kernel starts as root outside the sandbox for every crash unless RLIMIT_CORE is 1, and this caller's hard core limit is 0: runs are refused")
        },
        fix: (!ok).then(|| {
            "raise the caller's hard core limit to 1 or more (`* hard core unlimited` in /etc/security/limits.conf, LimitCORE=0:infinity in a systemd unit), or run with --allow-degraded core-dumps (reported in each result)".into()
        }),
        explanation: None,
    }
}

fn seccomp_check() -> Check {
    let actions = read_trim("/proc/sys/kernel/seccomp/actions_avail");
    let ok = nix::sys::prctl::get_no_new_privs().is_ok()
        && actions
            .as_deref()
            .is_some_and(|a| a.contains("kill_process") && a.contains("errno"));
    Check {
        name: "seccomp",
        ok,
        required: true,
        detail: match &actions {
            Some(a) => format!("seccomp filters available (actions: {a})"),
            None => "no /proc/sys/kernel/seccomp/actions_avail: the kernel lacks CONFIG_SECCOMP_FILTER".into(),
        },
        fix: (!ok).then(|| "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER (every major distribution's is)".into()),
        explanation: None,
    }
}

fn landlock_check() -> Check {
    let target = crate::security::landlock::TARGET_ABI as i32;
    match sys::landlock_abi() {
        Ok(v) => Check {
            name: "landlock",
            ok: true,
            required: true,
            detail: if v >= target {
                format!("Landlock ABI {v}: filesystem, TCP and scope rules all enforced")
            } else {
                format!("Landlock ABI {v} (cordon targets {target}): filesystem rules enforced, newer rule types reported as partial; the namespaces cover them")
            },
            fix: None,
            explanation: None,
        },
        Err(e) => Check {
            name: "landlock",
            ok: false,
            required: true,
            detail: match e {
                Errno::EOPNOTSUPP => "Landlock is built into the kernel but not enabled at boot".into(),
                Errno::ENOSYS => "the kernel has no Landlock (needs 5.13+ with CONFIG_SECURITY_LANDLOCK)".into(),
                other => format!("Landlock probe failed: {other}"),
            },
            fix: Some("add `landlock` to the kernel's `lsm=` boot parameter (e.g. lsm=landlock,lockdown,yama,apparmor,bpf), or run with `--allow-degraded landlock` to accept running without it".into()),
            explanation: None,
        },
    }
}

/// `--net allow=` needs Landlock's TCP rules (ABI 4) to confine the program to the proxy.
fn net_allow_check() -> Check {
    let need = crate::security::landlock::NET_ABI;
    let abi = sys::landlock_abi().unwrap_or(0);
    let ok = abi >= need;
    Check {
        name: "net-allow",
        ok,
        required: false,
        detail: if ok {
            format!("--net allow= available: Landlock ABI {abi} confines TCP connections to cordon's proxy port")
        } else {
            format!("--net allow= is refused: Landlock ABI {abi} cannot restrict TCP connections (ABI {need}, Linux 6.7, is needed); --net none and --net host work")
        },
        fix: (!ok).then(|| "use Linux 6.7 or newer with Landlock enabled, or pass `--allow-degraded landlock` with --net allow= to rely on the network namespace alone".into()),
        explanation: None,
    }
}

/// Runs every check.
pub fn report() -> Report {
    let mut checks = Vec::new();
    let uid = nix::unistd::geteuid().as_raw();
    let userns = [
        (
            "kernel.unprivileged_userns_clone",
            "/proc/sys/kernel/unprivileged_userns_clone",
            "0",
        ),
        (
            "user.max_user_namespaces",
            "/proc/sys/user/max_user_namespaces",
            "0",
        ),
        (
            "kernel.apparmor_restrict_unprivileged_userns",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
        ),
    ];
    let blocked: Vec<String> = userns
        .iter()
        .filter(|(_, p, bad)| read_trim(p).as_deref() == Some(*bad))
        .map(|(n, _, bad)| format!("{n}={bad}"))
        .collect();
    checks.push(Check {
        name: "user-namespace-sysctls",
        ok: blocked.is_empty() || uid == 0,
        required: false,
        detail: if blocked.is_empty() {
            "no sysctl or AppArmor setting restricts unprivileged user namespaces".into()
        } else {
            format!("restricted for unprivileged users: {}", blocked.join(", "))
        },
        fix: (!blocked.is_empty()).then(|| {
            userns_hint(Errno::EPERM)
                .trim_start_matches("; ")
                .to_string()
        }),
        explanation: None,
    });
    namespace_checks(&mut checks);
    checks.push(sandbox_ids_check(crate::launch::host_ids()));
    checks.push(network_namespace_check());
    checks.push(overlay_check());
    checks.push(seccomp_check());
    checks.push(landlock_check());
    checks.push(net_allow_check());
    let limits = crate::limits::probe();
    checks.push(Check {
        name: "rlimit-fallback",
        ok: true,
        required: false,
        detail: format!(
            "rlimits are always available; used when no cgroup can be had (memory as RLIMIT_DATA and a polled watch of the whole sandbox, processes as RLIMIT_NPROC, --cpus as CPU affinity in whole CPUs); this caller gets {}",
            limits.auto_backend
        ),
        fix: (limits.auto_backend == "rlimit").then(|| rlimit_fallback_fix(limits.version)),
        // The whole account, which each result's memory note gives in brief and points to.
        explanation: Some(memory_watch_explanation()),
    });
    // The watch counts socket buffers through sock_diag; without it, runs under the watch are
    // refused (required when this caller gets the rlimit backend).
    let sock_diag = crate::launch::sock_diag_probe();
    checks.push(Check {
        name: "memory-watch",
        ok: sock_diag.is_ok(),
        required: limits.auto_backend == "rlimit",
        detail: match &sock_diag {
            Ok(()) => "the rlimit backend's memory watch can read socket buffers (sock_diag: unix, TCP and UDP)".into(),
            Err(e) => e.clone(),
        },
        fix: sock_diag.is_err().then(|| {
            "load the kernel's sock_diag handlers: `modprobe unix_diag tcp_diag udp_diag` as root (or run with a cgroup, which needs no watch)".into()
        }),
        explanation: None,
    });
    checks.push(core_dump_check(
        &crate::limits::core_pattern(),
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_CORE)
            .map_or(0, |(_, hard)| hard),
        nix::unistd::geteuid().is_root()
            && caps::has_cap(
                None,
                caps::CapSet::Effective,
                caps::Capability::CAP_SYS_RESOURCE,
            )
            .unwrap_or(false),
    ));
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let ready = checks.iter().all(|c| c.ok || !c.required);
    Report {
        ready,
        uid,
        kernel,
        checks,
        limits,
    }
}

fn backend_line(b: &crate::limits::BackendProbe) -> String {
    if b.available {
        "usable".into()
    } else {
        b.reason.clone().unwrap_or_else(|| "not usable".into())
    }
}

/// Entry point of `cordon doctor`; returns the exit code (0 when ready, 1 otherwise).
pub fn main(json: bool) -> i32 {
    let r = report();
    if json {
        match serde_json::to_string_pretty(&r) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("cordon doctor: cannot encode the report: {e}");
                return 125;
            }
        }
    } else {
        println!("cordon doctor: kernel {}, uid {}", r.kernel, r.uid);
        for c in &r.checks {
            let mark = if c.ok {
                "ok  "
            } else if c.required {
                "FAIL"
            } else {
                "warn"
            };
            println!("[{mark}] {}: {}", c.name, c.detail);
            if let Some(f) = &c.fix {
                println!("       fix: {f}");
            }
            // The memory watch's long account matters to a caller who gets it; for one with a
            // cgroup, where to find it.
            match &c.explanation {
                Some(_) if c.name == "rlimit-fallback" && r.limits.auto_backend != "rlimit" => {
                    println!(
                        "       (how --memory is held without a cgroup: `cordon doctor --json`, or the README's \"Memory without a cgroup\")"
                    );
                }
                Some(x) => print!("{}", wrap(x, "       ", 93)),
                None => {}
            }
        }
        let l = &r.limits;
        // A cgroup version this host lacks is no warning when this caller gets the other.
        let cgroup_used = l.auto_backend.starts_with("cgroup");
        let mark = |b: bool| match (b, cgroup_used) {
            (true, _) => "ok  ",
            (false, true) => "n/a ",
            (false, false) => "warn",
        };
        println!(
            "[{}] cgroup v2: {}",
            mark(l.cgroup_v2.available),
            backend_line(&l.cgroup_v2)
        );
        println!(
            "[{}] cgroup v1: {}",
            mark(l.cgroup_v1.available),
            backend_line(&l.cgroup_v1)
        );
        if let Some(fix) = l
            .cgroup_v2
            .fix
            .as_ref()
            .filter(|_| !l.cgroup_v2.available && !l.cgroup_v1.available)
        {
            println!("       fix: {fix}");
        }
        if let Some(d) = &l.delegation {
            println!("       delegation: {d}");
        }
        let how = match l.auto_path {
            "own-cgroup-v2" => "in cordon's own cgroup",
            "systemd-scope" => {
                "in a transient scope with Delegate=yes it asks the systemd user manager for"
            }
            "cgroup-v1" => "in cordon's own v1 cgroups",
            _ => "as the fallback: no cgroup can be had (see above)",
        };
        println!(
            "[ok  ] limits: cordon exec will use {} {how} (path {}, cgroup version seen: {:?})",
            l.auto_backend, l.auto_path, l.version
        );
        println!("{}", verdict(r.ready, l.auto_backend));
    }
    if r.ready { 0 } else { 1 }
}

/// doctor's last line: whether `cordon exec` runs, and how exact its limits are with the
/// backend it will use.
fn verdict(ready: bool, backend: &str) -> String {
    if !ready {
        return "NOT ready: fix the FAIL lines above".into();
    }
    if backend == "rlimit" {
        "ready: cordon exec runs with full isolation; its limits are rlimits, not a cgroup's: memory polled over the whole sandbox, CPU time per process, --cpus in whole CPUs, no count of refused forks (see `limits` above for how to get a cgroup)".into()
    } else {
        format!("ready: cordon exec runs with full isolation and exact limits ({backend})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_says_how_exact_the_limits_are() {
        assert!(verdict(false, "cgroup-v2").starts_with("NOT ready"));
        assert!(
            verdict(true, "cgroup-v1").ends_with("full isolation and exact limits (cgroup-v1)")
        );
        let v = verdict(true, "rlimit");
        assert!(v.contains("its limits are rlimits, not a cgroup's"), "{v}");
    }

    #[test]
    fn the_memory_watch_explanation_is_the_whole_account_wrapped_word_for_word() {
        let x = memory_watch_explanation();
        assert!(x.contains(&crate::limits::memory_account()), "{x}");
        assert!(x.contains(crate::limits::MEMORY_WATCH_README), "{x}");
        assert!(x.contains("limits.memoryBytes.note"), "{x}");
        let w = wrap(&x, "       ", 93);
        assert!(w.lines().count() > 20, "{w}");
        for line in w.lines() {
            let text = line
                .strip_prefix("       ")
                .unwrap_or_else(|| panic!("{line:?}"));
            assert!(!text.starts_with(' ') && !text.is_empty(), "{line:?}");
            // Only a word longer than the width may pass it, alone on its line.
            assert!(
                text.chars().count() <= 93 || !text.contains(' '),
                "{line:?}"
            );
        }
        let words = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(words(&w), words(&x));
        assert_eq!(wrap("", "  ", 10), "");
        assert_eq!(
            wrap("a bb ccc dddddddddddd e", "> ", 6),
            "> a bb\n> ccc\n> dddddddddddd\n> e\n"
        );
    }

    #[test]
    fn the_rlimit_fallback_fix_offers_delegation_only_where_it_exists() {
        use crate::limits::CgroupVersion;
        for v in [CgroupVersion::Hybrid, CgroupVersion::V1] {
            let fix = rlimit_fallback_fix(v);
            assert!(
                !fix.contains("systemd-run") && fix.contains("run as root"),
                "{v:?}: {fix}"
            );
        }
        let fix = rlimit_fallback_fix(CgroupVersion::V2);
        assert!(fix.contains("systemd-run --user --scope"), "{fix}");
    }

    #[test]
    fn the_sandbox_ids_check_says_what_the_sandbox_maps_to_and_fails_only_when_refused() {
        use crate::launch::HostIds;
        let c = sandbox_ids_check(Ok(HostIds::Own {
            uid: 2_000_000_007,
            gid: 2_000_000_007,
            host_root: true,
        }));
        assert!(
            c.ok && c.required && c.detail.contains("2000000007") && c.fix.is_none(),
            "{c:?}"
        );
        let c = sandbox_ids_check(Ok(HostIds::Own {
            uid: 40000,
            gid: 40001,
            host_root: false,
        }));
        assert!(
            c.ok && c.detail.contains("nested") && c.detail.contains("40000:40001"),
            "{c:?}"
        );
        let c = sandbox_ids_check(Ok(HostIds::Caller {
            uid: 1001,
            gid: 1002,
        }));
        assert!(
            c.ok && c.detail.contains("caller's own ids (1001:1002)"),
            "{c:?}"
        );
        // Each refusal with its own fix, not a pointer back to doctor.
        for (maps, fix) in [("0 0 1\n", "--map-auto"), ("", "mount /proc")] {
            let c = sandbox_ids_check(crate::launch::choose_ids(0, 0, maps, maps, 5));
            assert!(
                !c.ok
                    && c.required
                    && !c.detail.contains("cordon doctor")
                    && c.fix.as_deref().is_some_and(|f| f.contains(fix)),
                "{c:?}"
            );
        }
    }

    #[test]
    fn the_core_dump_check_fails_only_for_a_piped_pattern_and_a_fixed_hard_limit_of_0() {
        let piped = "|/lib/systemd/systemd-coredump %P %u";
        for (pattern, hard, can_raise, ok) in [
            ("core", 0, false, true),
            (piped, 1, false, true),
            (piped, u64::MAX, false, true),
            (piped, 0, true, true),
            (piped, 0, false, false),
        ] {
            let c = core_dump_check(pattern, hard, can_raise);
            assert_eq!(c.ok, ok, "{pattern} {hard} {can_raise}: {}", c.detail);
            assert_eq!(c.fix.is_some(), !ok, "{pattern} {hard} {can_raise}");
        }
        let c = core_dump_check(piped, 0, false);
        assert!(c.detail.contains(piped));
        assert!(c.fix.unwrap().contains("--allow-degraded core-dumps"));
    }
}

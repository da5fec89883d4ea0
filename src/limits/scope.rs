//! A delegated cgroup v2 from the caller's systemd user manager, the way rootless podman gets
//! one: `StartTransientUnit` on `org.freedesktop.systemd1.Manager` over the session bus, for a
//! scope `cordon-<pid>-<run_id>.scope` with `PIDs=[cordon's pid]` and `Delegate=yes` (job mode
//! `fail`). When the job has run, cordon is in the scope's cgroup, which the user owns; the
//! v2 backend then proceeds as in any delegated cgroup (it moves cordon into a leaf and enables
//! the controllers for the sandbox cgroup next to it).
//!
//! The bus is spoken through `busctl` (it ships with systemd on every host where this path can
//! work), so cordon carries no D-Bus client; the subprocess is paid only by an unprivileged
//! caller on a pure cgroup v2 host without a usable delegated cgroup. The job is waited for by
//! reading `/proc/self/cgroup` until it names the scope ([`WAIT`] at most, [`AFTER_JOB`] once
//! the job has ended: see [`wait_for_move`]).
//!
//! The scope holds cordon (and its cgroup keeper) only: when they are gone it has no process
//! left, systemd stops it and removes its cgroup with everything cordon created below it
//! (`CollectMode=inactive-or-failed` unloads it even if it failed).
//!
//! `CORDON_NO_SYSTEMD_SCOPE=1` turns the request off (then `auto` falls back to rlimits and
//! says so); `--limits-backend rlimit` skips every cgroup.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where `busctl` is looked for (Debian, Fedora, Arch and NixOS-style profiles). Not `$PATH`:
/// cordon runs one fixed program for this.
pub const BUSCTL_PATHS: [&str; 3] = [
    "/usr/bin/busctl",
    "/bin/busctl",
    "/run/current-system/sw/bin/busctl",
];
/// Set to `1` (or any value but `0` and empty) to never ask for a scope.
pub const OPT_OUT_ENV: &str = "CORDON_NO_SYSTEMD_SCOPE";
/// How long cordon waits for the scope's job to move it (after the call returned).
pub const WAIT: Duration = Duration::from_secs(5);
/// `busctl --timeout`: how long one method call may take.
const CALL_TIMEOUT_S: u32 = 10;

/// A scope cordon now runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obtained {
    /// `cordon-<pid>-<run_id>.scope`
    pub unit: String,
    /// The text of `/proc/self/cgroup` after the move.
    pub proc_self_cgroup: String,
}

/// Where a delegated cgroup can come from when cordon's own is not usable. The real one is
/// [`SystemdUserScope`]; unit tests pass fakes.
pub trait UserScope: std::fmt::Debug {
    /// Without contacting anything: whether cordon would ask (the bus address it would use),
    /// or why it will not.
    fn reachable(&self) -> Result<String, String>;
    /// Moves cordon (`pid`) into a new delegated scope, or says why not.
    fn obtain(&self, pid: u32, run_id: &str) -> Result<Obtained, String>;
    /// For `cordon doctor`: whether the manager answers, and where it runs, without a scope.
    fn ping(&self) -> Result<ManagerInfo, String>;
}

/// What `cordon doctor` learns from the user manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerInfo {
    /// `Manager.Version`
    pub version: String,
    /// `Manager.ControlGroup`: the manager's own cgroup (v2 path), whose controllers its scopes
    /// can have at most.
    pub control_group: String,
}

/// Never obtains a scope; `reachable` and `obtain` give the reason.
#[derive(Debug, Clone)]
pub struct NoScope(pub String);

impl UserScope for NoScope {
    fn reachable(&self) -> Result<String, String> {
        Err(self.0.clone())
    }
    fn obtain(&self, _pid: u32, _run_id: &str) -> Result<Obtained, String> {
        Err(self.0.clone())
    }
    fn ping(&self) -> Result<ManagerInfo, String> {
        Err(self.0.clone())
    }
}

/// The caller's systemd user manager, through `busctl --user`; or, for a root cordon-oci
/// on a host booted with systemd, the system manager, through `busctl --system`
/// ([`SystemdUserScope::system_from_env`]).
#[derive(Debug, Clone)]
pub struct SystemdUserScope {
    /// The session (or system) bus address, or why there is none.
    bus: Result<String, String>,
    busctl: Option<PathBuf>,
    /// Set by [`OPT_OUT_ENV`].
    disabled: bool,
    /// The system manager on the system bus, not the user manager on the session bus.
    system: bool,
}

/// The system bus's socket when `$DBUS_SYSTEM_BUS_ADDRESS` does not name another (the D-Bus
/// specification's default).
pub const SYSTEM_BUS_SOCKET: &str = "/run/dbus/system_bus_socket";

/// The system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else [`SYSTEM_BUS_SOCKET`] when it exists; or
/// why there is none.
pub fn system_bus(
    system_bus_env: Option<&str>,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<String, String> {
    if let Some(bus) = system_bus_env.filter(|s| !s.is_empty()) {
        return Ok(bus.to_string());
    }
    if exists(Path::new(SYSTEM_BUS_SOCKET)) {
        Ok(format!("unix:path={SYSTEM_BUS_SOCKET}"))
    } else {
        Err(format!(
            "no system bus: DBUS_SYSTEM_BUS_ADDRESS is not set and {SYSTEM_BUS_SOCKET} does not exist (no dbus-daemon or dbus-broker running)"
        ))
    }
}

/// The session bus: `$DBUS_SESSION_BUS_ADDRESS`, else the socket `$XDG_RUNTIME_DIR/bus` when it
/// exists; or why there is none.
pub fn session_bus(
    session_bus_env: Option<&str>,
    xdg_runtime_dir: Option<&str>,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<String, String> {
    if let Some(bus) = session_bus_env.filter(|s| !s.is_empty()) {
        return Ok(bus.to_string());
    }
    let Some(dir) = xdg_runtime_dir.filter(|d| !d.is_empty()) else {
        return Err(
            "no session bus: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set \
             (not a systemd login session)"
                .to_string(),
        );
    };
    let sock = Path::new(dir).join("bus");
    if exists(&sock) {
        Ok(format!(
            "unix:path={}",
            address_escape(sock.as_os_str().as_bytes())
        ))
    } else {
        Err(format!(
            "no session bus: DBUS_SESSION_BUS_ADDRESS is not set and {} does not exist \
             (no systemd user manager with dbus-user-session / dbus-broker for this user)",
            sock.display()
        ))
    }
}

/// A value in a D-Bus address: every byte outside `[-0-9A-Za-z_/.\\*]` as `%XX` (the D-Bus
/// specification's "Server Addresses"; systemd's `bus_address_escape`). Unescaped, a `,` or
/// `;` in `$XDG_RUNTIME_DIR` would end the path and start another key or address, and a `%`
/// would be decoded.
pub fn address_escape(value: &[u8]) -> String {
    let mut out = String::with_capacity(value.len());
    for &b in value {
        if b.is_ascii_alphanumeric() || b"-_/.\\*".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// Whether `value` of [`OPT_OUT_ENV`] turns the scope request off.
pub fn opted_out(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

impl SystemdUserScope {
    pub fn new(
        session_bus_env: Option<&str>,
        xdg_runtime_dir: Option<&str>,
        opt_out: Option<&str>,
        exists: &dyn Fn(&Path) -> bool,
    ) -> Self {
        SystemdUserScope {
            bus: session_bus(session_bus_env, xdg_runtime_dir, exists),
            busctl: BUSCTL_PATHS.iter().map(PathBuf::from).find(|p| exists(p)),
            disabled: opted_out(opt_out),
            system: false,
        }
    }

    /// The system manager, on the system bus ([`system_bus`]).
    pub fn new_system(system_bus_env: Option<&str>, exists: &dyn Fn(&Path) -> bool) -> Self {
        SystemdUserScope {
            bus: system_bus(system_bus_env, exists),
            busctl: BUSCTL_PATHS.iter().map(PathBuf::from).find(|p| exists(p)),
            disabled: false,
            system: true,
        }
    }

    /// [`SystemdUserScope::new_system`] from the environment and the real filesystem.
    pub fn system_from_env() -> Self {
        SystemdUserScope::new_system(
            std::env::var("DBUS_SYSTEM_BUS_ADDRESS").ok().as_deref(),
            &|p| p.exists(),
        )
    }

    /// "user" or "system", for messages.
    fn manager(&self) -> &'static str {
        if self.system { "system" } else { "user" }
    }

    /// From cordon's environment and the real filesystem.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok();
        SystemdUserScope::new(
            var("DBUS_SESSION_BUS_ADDRESS").as_deref(),
            var("XDG_RUNTIME_DIR").as_deref(),
            var(OPT_OUT_ENV).as_deref(),
            &|p| p.exists(),
        )
    }

    fn ready(&self) -> Result<(&str, &Path), String> {
        if self.disabled {
            return Err(format!(
                "the systemd scope request is turned off ({OPT_OUT_ENV} is set)"
            ));
        }
        let bus = self.bus.as_deref().map_err(String::clone)?;
        let Some(busctl) = &self.busctl else {
            return Err(format!(
                "busctl (part of systemd) not found at {}",
                BUSCTL_PATHS.join(", ")
            ));
        };
        Ok((bus, busctl))
    }

    /// `busctl --user ARGS` on the session bus (`--system` on the system bus); its stdout,
    /// or the error it printed.
    fn busctl(&self, args: &[&str]) -> Result<String, String> {
        let (bus, busctl) = self.ready()?;
        let timeout = format!("--timeout={CALL_TIMEOUT_S}");
        let (flag, env) = if self.system {
            ("--system", "DBUS_SYSTEM_BUS_ADDRESS")
        } else {
            ("--user", "DBUS_SESSION_BUS_ADDRESS")
        };
        let out = Command::new(busctl)
            .args([flag, "--no-pager", &timeout])
            // The end of busctl's options: a unit or slice name may start with `-` (`-.slice`).
            .arg("--")
            .args(args)
            .env(env, bus)
            .env("SYSTEMD_COLORS", "0")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", busctl.display()))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        Err(format!(
            "the systemd {} manager on {bus} refused or did not answer ({}): {}",
            self.manager(),
            out.status,
            if err.is_empty() {
                "busctl printed no error"
            } else {
                err
            }
        ))
    }

    /// The user manager's `Version` and `ControlGroup`: a cheap check that it answers, for
    /// `cordon doctor`.
    fn info(&self) -> Result<ManagerInfo, String> {
        let out = self.busctl(&[
            "get-property",
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "Version",
            "ControlGroup",
        ])?;
        parse_info(&out).ok_or_else(|| {
            format!("unexpected answer from busctl get-property Version ControlGroup: {out:?}")
        })
    }
}

/// `s "252.38-1~deb12u1"` and `s "/user.slice/…/user@1000.service"`, one a line.
pub fn parse_info(out: &str) -> Option<ManagerInfo> {
    let mut values = out.lines().map(|l| {
        l.trim()
            .strip_prefix("s ")
            .map(|v| v.trim_matches('"').to_string())
    });
    let version = values.next()??;
    let control_group = values.next()??;
    control_group.starts_with('/').then_some(ManagerInfo {
        version,
        control_group,
    })
}

/// [`SystemdUserScope::from_env`], read only when first asked: the environment and the
/// filesystem are not looked at on the paths that never need a scope.
#[derive(Debug, Default)]
pub struct FromEnv(std::sync::OnceLock<SystemdUserScope>);

impl FromEnv {
    fn get(&self) -> &SystemdUserScope {
        self.0.get_or_init(SystemdUserScope::from_env)
    }
}

impl UserScope for FromEnv {
    fn reachable(&self) -> Result<String, String> {
        self.get().reachable()
    }
    fn obtain(&self, pid: u32, run_id: &str) -> Result<Obtained, String> {
        self.get().obtain(pid, run_id)
    }
    fn ping(&self) -> Result<ManagerInfo, String> {
        self.get().ping()
    }
}

/// The unit name for cordon `pid` and this run.
pub fn unit_name(pid: u32, run_id: &str) -> String {
    format!("cordon-{pid}-{run_id}.scope")
}

/// The description of cordon's own scopes.
const SUPERVISOR_DESCRIPTION: &str = "cordon sandbox supervisor (cgroup v2 limits)";

/// The `busctl call` arguments of `StartTransientUnit(unit, "fail", [PIDs, Delegate,
/// CollectMode, Description, and Slice when given], [])`: a delegated scope holding `pid`, in
/// `slice` (else the manager's default), described by `description`.
pub fn start_args_in(unit: &str, pid: u32, slice: Option<&str>, description: &str) -> Vec<String> {
    let pid = pid.to_string();
    let mut props: Vec<&str> = vec![
        "PIDs",
        "au",
        "1",
        &pid,
        "Delegate",
        "b",
        "true",
        "CollectMode",
        "s",
        "inactive-or-failed",
        "Description",
        "s",
        description,
    ];
    if let Some(slice) = slice {
        props.extend(["Slice", "s", slice]);
    }
    let count = (props.len() / 3).to_string();
    let mut args = vec![
        "call",
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StartTransientUnit",
        "ssa(sv)a(sa(sv))",
        unit,
        "fail",
        &count,
    ];
    args.extend(props);
    args.push("0");
    args.into_iter().map(String::from).collect()
}

/// Whether `/proc/self/cgroup` text puts cordon in (or below) `unit`.
pub fn in_unit(proc_self_cgroup: &str, unit: &str) -> bool {
    proc_self_cgroup
        .lines()
        .filter_map(|l| l.strip_prefix("0::"))
        .any(|path| path.split('/').any(|c| c == unit))
}

impl UserScope for SystemdUserScope {
    fn reachable(&self) -> Result<String, String> {
        self.ready().map(|(bus, _)| bus.to_string())
    }

    fn ping(&self) -> Result<ManagerInfo, String> {
        self.info()
    }

    fn obtain(&self, pid: u32, run_id: &str) -> Result<Obtained, String> {
        self.obtain_unit(&unit_name(pid, run_id), pid, None, SUPERVISOR_DESCRIPTION)
    }
}

impl SystemdUserScope {
    /// Moves this process (`pid`) into a new delegated scope `unit`, in `slice` when given:
    /// [`UserScope::obtain`] with the unit named by the caller (cordon-oci's
    /// `--systemd-cgroup`, where the engine names the container's unit).
    pub fn obtain_unit(
        &self,
        unit: &str,
        pid: u32,
        slice: Option<&str>,
        description: &str,
    ) -> Result<Obtained, String> {
        let unit = unit.to_string();
        let args = start_args_in(&unit, pid, slice, description);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let job = self.busctl(&args)?;
        let job = job
            .trim()
            .trim_start_matches("o ")
            .trim_matches('"')
            .to_string();
        let read = || {
            std::fs::read_to_string(super::host::PROC_SELF_CGROUP).map_err(|e| {
                format!(
                    "cannot read {}: {}",
                    super::host::PROC_SELF_CGROUP,
                    super::errno_text(&e)
                )
            })
        };
        // The job object exists until the job has run; its State answers while it does.
        let job_pending = || {
            !is_job_path(&job)
                || self
                    .busctl(&[
                        "get-property",
                        "org.freedesktop.systemd1",
                        &job,
                        "org.freedesktop.systemd1.Job",
                        "State",
                    ])
                    .is_ok()
        };
        wait_for_move(&unit, &job, read, job_pending, Instant::now() + WAIT).map_err(|e| {
            if self.system {
                e.replace("the user manager", "the system manager")
                    .replace("journalctl --user", "journalctl")
            } else {
                e
            }
        })
    }
}

impl SystemdUserScope {
    /// Asks the manager to stop `unit` (`StopUnit(unit, "replace")`), as runc and crun do
    /// when they destroy a container's scope: its cgroup goes at once rather than whenever
    /// the manager acts on the cgroup's emptiness. A unit the manager no longer has is
    /// stopped already.
    pub fn stop_unit(&self, unit: &str) -> Result<(), String> {
        match self.busctl(&stop_args(unit)) {
            Ok(_) => Ok(()),
            // busctl prints the manager's message ("Unit NAME not loaded."), not the error's
            // name (org.freedesktop.systemd1.NoSuchUnit).
            Err(why) if why.contains("not loaded") || why.contains("NoSuchUnit") => Ok(()),
            Err(why) => Err(why),
        }
    }
}

/// The `busctl call` arguments of `StopUnit(unit, "replace")`.
pub fn stop_args(unit: &str) -> Vec<&str> {
    vec![
        "call",
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StopUnit",
        "ss",
        unit,
        "replace",
    ]
}

/// Whether `path` is a job object of the manager (what `StartTransientUnit` returns).
fn is_job_path(path: &str) -> bool {
    path.strip_prefix("/org/freedesktop/systemd1/job/")
        .is_some_and(|id| {
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
}

/// After the job was queued: reads `/proc/self/cgroup` (`read`) until it puts cordon in
/// `unit`, at most until `deadline`. From [`JOB_CHECK_AFTER`] on it also asks whether the job
/// is still pending (`job_pending`, a bus call, so not on the fast path). Once the job has
/// run without the move showing, the wait ends [`AFTER_JOB`] later at the latest: a user
/// manager that cannot move a process itself asks the system manager to, without waiting
/// for it, so a move can still follow the job by a little; a failed job would otherwise
/// delay the fallback by the whole [`WAIT`].
pub fn wait_for_move(
    unit: &str,
    job: &str,
    mut read: impl FnMut() -> Result<String, String>,
    mut job_pending: impl FnMut() -> bool,
    mut deadline: Instant,
) -> Result<Obtained, String> {
    let started = Instant::now();
    let mut next_job_check = Some(started + JOB_CHECK_AFTER);
    let mut job_ended = None;
    loop {
        let now = Instant::now();
        if let Some(at) = next_job_check
            && now >= at
        {
            if job_pending() {
                next_job_check = Some(now + JOB_CHECK_EVERY);
            } else {
                next_job_check = None;
                job_ended = Some(now.duration_since(started));
                deadline = deadline.min(now + AFTER_JOB);
            }
        }
        let text = read()?;
        if in_unit(&text, unit) {
            return Ok(Obtained {
                unit: unit.to_string(),
                proc_self_cgroup: text,
            });
        }
        if Instant::now() >= deadline {
            let cgroup = text
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .unwrap_or("?")
                .to_string();
            let when = match job_ended {
                Some(t) => format!(
                    "its job ended after {} ms and no move followed within {} ms",
                    t.as_millis(),
                    AFTER_JOB.as_millis()
                ),
                None => format!("not within {} s", WAIT.as_secs()),
            };
            return Err(format!(
                "the user manager accepted {unit} (job {job}) but cordon was not moved into it: \
                 {when} (still in {cgroup}): the job failed or is stuck; see \
                 `journalctl --user -u {unit}` (the user manager moves processes itself only \
                 within its own cgroup tree, and otherwise asks the system manager)",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long a move may follow the end of its job (see [`wait_for_move`]).
pub const AFTER_JOB: Duration = Duration::from_secs(1);
/// When [`wait_for_move`] starts asking whether the job is still pending, and how often.
pub const JOB_CHECK_AFTER: Duration = Duration::from_millis(100);
const JOB_CHECK_EVERY: Duration = Duration::from_millis(200);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_bus_from_env_or_runtime_dir() {
        let all = |_: &Path| true;
        let none = |_: &Path| false;
        assert_eq!(
            session_bus(Some("unix:path=/run/user/1000/bus"), None, &none),
            Ok("unix:path=/run/user/1000/bus".to_string())
        );
        assert_eq!(
            session_bus(None, Some("/run/user/7"), &all),
            Ok("unix:path=/run/user/7/bus".to_string())
        );
        let e = session_bus(None, Some("/run/user/7"), &none).unwrap_err();
        assert!(e.contains("/run/user/7/bus does not exist"), "{e}");
        let e = session_bus(Some(""), None, &all).unwrap_err();
        assert!(e.contains("XDG_RUNTIME_DIR"), "{e}");
    }

    #[test]
    fn runtime_dir_is_escaped_in_the_bus_address() {
        let all = |_: &Path| true;
        // ',' would start another key, ';' another address, '%' an escape.
        assert_eq!(
            session_bus(
                None,
                Some("/run/user/7/a,guid=x;unixexec:path=%2fbin"),
                &all
            ),
            Ok("unix:path=/run/user/7/a%2cguid%3dx%3bunixexec%3apath%3d%252fbin/bus".to_string())
        );
        assert_eq!(
            session_bus(None, Some("/home/a b/\u{e9}"), &all),
            Ok("unix:path=/home/a%20b/%c3%a9/bus".to_string())
        );
        assert_eq!(address_escape(b"/run/user/1000/bus"), "/run/user/1000/bus");
        assert_eq!(address_escape(b"-_.*\\"), "-_.*\\");
    }

    #[test]
    fn system_bus_from_env_or_its_default_socket() {
        let all = |_: &Path| true;
        let none = |_: &Path| false;
        assert_eq!(
            system_bus(Some("unix:path=/run/x"), &none),
            Ok("unix:path=/run/x".to_string())
        );
        assert_eq!(
            system_bus(None, &all),
            Ok(format!("unix:path={SYSTEM_BUS_SOCKET}"))
        );
        let e = system_bus(Some(""), &none).unwrap_err();
        assert!(
            e.contains(SYSTEM_BUS_SOCKET) && e.contains("DBUS_SYSTEM_BUS_ADDRESS"),
            "{e}"
        );
        let s = SystemdUserScope::new_system(None, &all);
        assert_eq!(s.manager(), "system");
        assert_eq!(s.reachable(), Ok(format!("unix:path={SYSTEM_BUS_SOCKET}")));
    }

    #[test]
    fn opt_out_and_missing_busctl_are_reasons() {
        let all = |_: &Path| true;
        let only_bus = |p: &Path| p.ends_with("bus");
        let s = SystemdUserScope::new(Some("unix:path=/b"), None, None, &all);
        assert_eq!(s.reachable(), Ok("unix:path=/b".to_string()));
        let s = SystemdUserScope::new(Some("unix:path=/b"), None, Some("1"), &all);
        assert!(s.reachable().unwrap_err().contains(OPT_OUT_ENV));
        let s = SystemdUserScope::new(Some("unix:path=/b"), None, Some("0"), &all);
        assert!(s.reachable().is_ok(), "0 does not opt out");
        let s = SystemdUserScope::new(None, Some("/run/user/7"), None, &only_bus);
        assert!(s.reachable().unwrap_err().contains("busctl"));
        assert!(s.obtain(1, "r").unwrap_err().contains("busctl"));
    }

    #[test]
    fn stop_args_replace_any_job_of_the_unit() {
        assert_eq!(
            stop_args("cordon-a.scope")[4..],
            ["StopUnit", "ss", "cordon-a.scope", "replace"]
        );
    }

    #[test]
    fn start_args_ask_for_a_delegated_scope_holding_cordon() {
        let a = start_args_in("cordon-42-r1.scope", 42, None, SUPERVISOR_DESCRIPTION);
        let i = a.iter().position(|x| x == "StartTransientUnit").unwrap();
        assert_eq!(
            a[i + 1..i + 4],
            ["ssa(sv)a(sa(sv))", "cordon-42-r1.scope", "fail"]
        );
        let joined = a.join(" ");
        assert!(joined.contains("PIDs au 1 42 "), "{joined}");
        assert!(joined.contains("Delegate b true "), "{joined}");
        assert_eq!(a[i + 4], "4", "four properties follow");
        assert_eq!(a.last().map(String::as_str), Some("0"), "no aux units");
        let a = start_args_in("libpod-c1.scope", 7, Some("user.slice"), "container c1");
        let i = a.iter().position(|x| x == "StartTransientUnit").unwrap();
        assert_eq!(a[i + 2..i + 5], ["libpod-c1.scope", "fail", "5"]);
        let joined = a.join(" ");
        assert!(joined.contains("PIDs au 1 7 "), "{joined}");
        assert!(
            joined.contains("Description s container c1 Slice s user.slice 0"),
            "{joined}"
        );
    }

    #[test]
    fn parses_version_and_control_group() {
        let out = "s \"252.38-1~deb12u1\"\ns \"/user.slice/user-1000.slice/user@1000.service\"\n";
        assert_eq!(
            parse_info(out),
            Some(ManagerInfo {
                version: "252.38-1~deb12u1".to_string(),
                control_group: "/user.slice/user-1000.slice/user@1000.service".to_string(),
            })
        );
        assert_eq!(parse_info("s \"252\"\n"), None);
        assert_eq!(parse_info("s \"252\"\ns \"\"\n"), None);
    }

    #[test]
    fn a_job_that_ends_without_the_move_ends_the_wait() {
        let u = "cordon-42-r1.scope";
        let still = || Ok("0::/user.slice/session-2.scope\n".to_string());
        let t = Instant::now();
        let e = wait_for_move(u, "/j/1", still, || false, t + Duration::from_secs(30)).unwrap_err();
        let took = t.elapsed();
        assert!(took >= AFTER_JOB && took < AFTER_JOB * 3, "{took:?}");
        assert!(e.contains("was not moved into it: its job ended"), "{e}");
        assert!(e.contains("session-2.scope") && e.contains("/j/1"), "{e}");
        // A pending job is waited for until the deadline.
        let t = Instant::now();
        let e =
            wait_for_move(u, "/j/1", still, || true, t + Duration::from_millis(400)).unwrap_err();
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
        assert!(e.contains("not within"), "{e}");
        // The move shows before the job is asked about: no bus call.
        let moved = || Ok(format!("0::/app.slice/{u}\n"));
        let ok = wait_for_move(
            u,
            "/j/1",
            moved,
            || panic!("asked"),
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(ok.unit, u);
        // A job that ended with the move done: the move is what counts.
        let mut n = 0;
        let later = || {
            n += 1;
            Ok(if n > 15 {
                format!("0::/app.slice/{u}\n")
            } else {
                "0::/s\n".to_string()
            })
        };
        assert!(wait_for_move(u, "/j/1", later, || true, Instant::now() + WAIT).is_ok());
        // ...and a move that follows the end of the job by less than AFTER_JOB.
        let mut n = 0;
        let after_job = || {
            n += 1;
            Ok(if n > 40 {
                format!("0::/app.slice/{u}\n")
            } else {
                "0::/s\n".to_string()
            })
        };
        assert!(wait_for_move(u, "/j/1", after_job, || false, Instant::now() + WAIT).is_ok());
        assert!(is_job_path("/org/freedesktop/systemd1/job/123"));
        assert!(!is_job_path("/org/freedesktop/systemd1/job/"));
        assert!(!is_job_path("/org/freedesktop/systemd1/unit/x"));
    }

    #[test]
    fn in_unit_matches_a_whole_path_component() {
        let u = "cordon-42-r1.scope";
        let moved =
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/cordon-42-r1.scope\n";
        assert!(in_unit(moved, u));
        assert!(in_unit(
            "0::/a/cordon-42-r1.scope/cordon-42-supervisor\n",
            u
        ));
        assert!(!in_unit("0::/a/cordon-42-r1.scope2\n", u));
        assert!(!in_unit("0::/user.slice/session-2.scope\n", u));
        assert!(!in_unit("4:memory:/cordon-42-r1.scope\n", u));
    }
}

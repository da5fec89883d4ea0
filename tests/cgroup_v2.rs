//! The cgroup v2 backend on a pure cgroup v2 host (issue 6), as root and as an unprivileged user
//! with a delegated cgroup: memory.max with memory.swap.max = 0 and the OOM kill read from
//! memory.events, memory.peak, cpu.max from cpu.stat, pids.max, cgroup.kill at a timeout, the
//! sandbox cgroup removed afterwards, and the no-internal-processes rule.
//!
//! This development host is a cgroup v1/v2 hybrid, so here every test SKIPs; scripts/vm-test
//! runs them in a cgroup v2 guest, where `CORDON_TEST_CGROUP_SCOPES` starts every cordon in a
//! fresh delegated cgroup of its own (what `systemd-run --scope -p Delegate=yes` gives).
//! Without that variable the tests still run on a pure v2 host, but a caller that does not get
//! the v2 backend there is a SKIP with cordon's own reason.
//!
//! Timing asserts: only generous ratios (the guest runs under software emulation).

#[macro_use]
mod common;

use common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: u64 = 1024 * 1024;

/// Whether the v2 tests can run for `who`; prints the SKIP line otherwise.
fn v2_ready(who: Who, test: &str) -> bool {
    // scripts/vm-test's guest: a skip there would hide exactly what it is for.
    let required = std::env::var("CORDON_TEST_REQUIRE_V2").as_deref() == Ok("1");
    if required {
        assert_eq!(
            cgroup_layout(),
            CgroupLayout::PureV2,
            "{test}: CORDON_TEST_REQUIRE_V2=1 on a host that is not pure cgroup v2"
        );
        assert!(
            cgroup_scopes().is_some(),
            "{test}: CORDON_TEST_REQUIRE_V2=1 without CORDON_TEST_CGROUP_SCOPES"
        );
    }
    if cgroup_layout() != CgroupLayout::PureV2 {
        skip!(
            "SKIP: {test}: the host is not pure cgroup v2 ({:?}); scripts/vm-test runs this in a cgroup v2 guest",
            cgroup_layout()
        );
        return false;
    }
    if cgroup_scopes().is_some() {
        return true;
    }
    let r = exec_json_run(who, &[] as &[&str], &["true"]);
    if r.backend() != "cgroup-v2" {
        skip!(
            "SKIP: {test}: cordon gets no cgroup v2 here ({}); set CORDON_TEST_CGROUP_SCOPES (scripts/vm-test does)",
            r.get("/limits/backendNote").as_str().unwrap_or("")
        );
        return false;
    }
    true
}

/// The sandbox cgroup named in `limits.backendNote`: `cgroup v2 (<dir>…)`.
fn sandbox_cgroup(r: &JsonRun) -> PathBuf {
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    let dir = note
        .strip_prefix("cgroup v2 (")
        .and_then(|rest| rest.split([';', ')']).next())
        .unwrap_or_else(|| panic!("backendNote names no v2 cgroup:\n{}", r.describe()));
    PathBuf::from(dir)
}

fn assert_v2(r: &JsonRun) {
    assert_eq!(r.backend(), "cgroup-v2", "{}", r.describe());
}

/// Allocates (and touches) 8 MB at a time, at most 320 MB.
const MEMORY_BOMB: &str = "\
a = []
for i in range(40):
    a.append(bytearray(8 * 1024 * 1024))
print('NOT LIMITED: allocated', len(a) * 8, 'MB')
";

both!(fn memory_bomb_oom_killed_status_from_memory_events(who) {
    if !v2_ready(who, "memory_bomb_oom_killed") {
        return;
    }
    let r = exec_json_run(who, &["--memory", "64M", "--timeout", "60s"], &[PY, "-c", MEMORY_BOMB]);
    assert_v2(&r);
    assert!(!r.output().contains("NOT LIMITED"), "memory.max not enforced:\n{}", r.describe());
    assert_eq!(r.status(), "memory_limit", "{}", r.describe());
    assert_eq!(r.code(), 137, "{}", r.describe());
    assert_eq!(r.get("/oomKilled"), &json!(true), "{}", r.describe());
    // The kill is read from memory.events (oom_kill), not guessed from the exit signal.
    assert_eq!(r.get("/oomKilledSource"), &json!("cgroup-v2"), "{}", r.describe());
    let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("");
    assert!(
        note.contains("memory.max") && note.contains("memory.swap.max = 0"),
        "swap must be off for the sandbox: {note:?}\n{}",
        r.describe()
    );
    let peak = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!(
        (32 * MIB..=80 * MIB).contains(&peak),
        "memory.peak {peak} should be near the 64M limit:\n{}",
        r.describe()
    );
});

both!(fn memory_peak_is_the_cgroup_peak(who) {
    if !v2_ready(who, "memory_peak") {
        return;
    }
    // 96 MB touched, then freed: the peak stays, the current usage would not.
    let prog = "b = bytearray(96 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\ndel b\nprint('done')";
    let r = exec_json_run(who, &["--memory", "256M", "--timeout", "60s"], &[PY, "-c", prog]);
    assert_v2(&r);
    assert_eq!(r.expect_ok(), "done\n");
    assert_eq!(r.get("/memoryUsedSource"), &json!("cgroup-v2"), "{}", r.describe());
    assert_eq!(r.get("/oomKilled"), &json!(false), "{}", r.describe());
    let peak = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!(
        (96 * MIB..256 * MIB).contains(&peak),
        "memory.peak {peak} for a 96 MB allocation under 256M:\n{}",
        r.describe()
    );
});

both!(fn cpu_max_holds_a_multithread_burn(who) {
    if !v2_ready(who, "cpu_max_holds_a_burn") {
        return;
    }
    let r = exec_json_run(who, &["--cpus", "0.25", "--timeout", "60s"], &[PY, "-c", &cpu_burn(3.0)]);
    assert_v2(&r);
    r.expect_ok();
    assert_eq!(r.get("/cpuTimeSource"), &json!("cgroup-v2"), "CPU time must come from cpu.stat:\n{}", r.describe());
    let note = r.get("/limits/cpus/note").as_str().unwrap_or("");
    assert_eq!(note, "cpu.max = 25000 100000", "{}", r.describe());
    let wall = r.get("/executionTime").as_f64().unwrap_or(0.0);
    let cpu = r.get("/cpuTime").as_f64().unwrap_or(0.0);
    assert!(wall >= 3000.0, "the burn ran {wall} ms:\n{}", r.describe());
    // Unthrottled, 4 spinning threads use every CPU there is (at least 1 x wall). --cpus 0.25
    // holds them near 0.25 x wall; generous bound for emulation and python start-up.
    assert!(cpu < 0.6 * wall, "CPU time {cpu} ms over {wall} ms wall under --cpus 0.25:\n{}", r.describe());
    assert!(cpu > 0.02 * wall, "CPU time {cpu} ms is too low to be the kernel's count:\n{}", r.describe());
});

both!(fn pids_max_holds_a_fork_bomb(who) {
    if !v2_ready(who, "pids_max_holds_a_fork_bomb") {
        return;
    }
    let r = exec_json_run(who, &["--pids", "12", "--timeout", "30s"], &[PY, "-c", FORK_BOMB]);
    assert_v2(&r);
    r.expect_ok();
    assert_eq!(r.get("/limits/pids/enforcement"), &json!("cgroup-v2"), "{}", r.describe());
    assert_eq!(r.get("/limits/pids/note"), &json!("pids.max"), "{}", r.describe());
    let line = r.output().trim().to_string();
    let (forks, err) = line.split_once(' ').unwrap_or_else(|| panic!("no fork report:\n{}", r.describe()));
    assert_eq!(err, "EAGAIN", "fork must fail with EAGAIN at pids.max:\n{}", r.describe());
    let forks: u32 = forks.parse().unwrap_or_else(|_| panic!("{}", r.describe()));
    assert!((1..12).contains(&forks), "{forks} forks under --pids 12:\n{}", r.describe());
});

both!(fn timeout_kills_the_whole_cgroup_and_removes_it(who) {
    if !v2_ready(who, "timeout_kills_the_whole_cgroup") {
        return;
    }
    let m = marker(who, 601);
    // Sleepers in the background, one double-forked out of the shell's sight.
    let script = format!("sleep {m} & (sleep {m} &) ; setsid sleep {m} & sleep {m}");
    let r = exec_json_run(who, &["--timeout", "2s"], &["sh", "-c", &script]);
    assert_v2(&r);
    assert_eq!(r.status(), "timeout", "{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_none_left(&m, Duration::from_secs(5), &r.describe());
    let dir = sandbox_cgroup(&r);
    assert!(!dir.exists(), "the sandbox cgroup {} outlived the run:\n{}", dir.display(), r.describe());
});

/// A cgroup the test owns, removed (with its leaves) on drop.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn new(parent: &Path, name: &str, owner: Option<(u32, u32)>) -> TestCgroup {
        let dir = parent.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        if let Some((uid, gid)) = owner {
            for f in [
                "",
                "cgroup.procs",
                "cgroup.subtree_control",
                "cgroup.threads",
            ] {
                let p = if f.is_empty() {
                    dir.clone()
                } else {
                    dir.join(f)
                };
                std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
            }
        }
        TestCgroup(dir)
    }
    fn subdirs(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for name in self.subdirs() {
            let _ = std::fs::remove_dir(self.0.join(name));
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The parent for the test's own cgroups: the scopes directory of this variant.
fn scopes_parent(who: Who, test: &str) -> Option<PathBuf> {
    if !running_as_root() {
        skip!("SKIP: {test}: needs root to place cordon in a given cgroup");
        return None;
    }
    match cgroup_scopes() {
        Some(p) => Some(p.join(who.scope_dir())),
        None => {
            skip!("SKIP: {test}: CORDON_TEST_CGROUP_SCOPES is not set (scripts/vm-test sets it)");
            None
        }
    }
}

both!(fn sandbox_cgroups_are_leaves_cordon_moves_itself(who) {
    if !v2_ready(who, "sandbox_cgroups_are_leaves") {
        return;
    }
    let Some(parent) = scopes_parent(who, "sandbox_cgroups_are_leaves") else { return };
    let owner = (who == Who::User).then(|| (who.caller_uid(), who.caller_gid()));
    let scope = TestCgroup::new(&parent, "leaves", owner);
    let r = Cordon::exec(who, &["--json", "--memory", "64M"], &[PY, "-c", MEMORY_BOMB])
        .scope(Scope::Existing(scope.0.clone()))
        .run_json();
    // cordon started in `scope`, holding a process (itself): it could enable the controllers
    // there only after moving itself into a leaf.
    assert_v2(&r);
    assert_eq!(r.status(), "memory_limit", "{}", r.describe());
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    assert!(note.contains("moved itself into the leaf"), "{}", r.describe());
    let enabled = std::fs::read_to_string(scope.0.join("cgroup.subtree_control")).unwrap_or_default();
    for c in ["memory", "pids", "cpu"] {
        assert!(enabled.split_whitespace().any(|e| e == c), "{c} not enabled in {}: {enabled:?}", scope.0.display());
    }
    assert_eq!(sandbox_cgroup(&r).parent(), Some(scope.0.as_path()), "{}", r.describe());
    // Afterwards: the sandbox cgroup is gone (cordon's keeper removes it as cordon returns);
    // only cordon's own (now empty) leaf is left.
    wait_until(Duration::from_secs(5), || scope.subdirs().len() <= 1);
    let left = scope.subdirs();
    assert_eq!(left.len(), 1, "left behind: {left:?}");
    assert!(left[0].starts_with("cordon-") && left[0].ends_with("-supervisor"), "{left:?}");
    let procs = std::fs::read_to_string(scope.0.join("cgroup.procs")).unwrap_or_default();
    assert_eq!(procs, "", "no process may sit in a cgroup with controllers enabled");
});

both!(fn other_processes_in_cordons_cgroup_are_reported(who) {
    if !v2_ready(who, "other_processes_are_reported") {
        return;
    }
    let Some(parent) = scopes_parent(who, "other_processes_are_reported") else { return };
    let owner = (who == Who::User).then(|| (who.caller_uid(), who.caller_gid()));
    let scope = TestCgroup::new(&parent, "crowded", owner);
    let mut sleeper = std::process::Command::new("sleep").arg("120").spawn().expect("spawn sleep");
    std::fs::write(scope.0.join("cgroup.procs"), sleeper.id().to_string()).expect("move sleep");

    let r = Cordon::exec(who, &["--json"], &["true"])
        .scope(Scope::Existing(scope.0.clone()))
        .run_json();
    let forced = Cordon::exec(who, &["--json", "--limits-backend", "cgroup-v2"], &["true"])
        .scope(Scope::Existing(scope.0.clone()))
        .run_json();
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    // auto: an explicit downgrade that names the other process and the fix.
    r.expect_ok();
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    assert!(note.contains(&format!("pids {}", sleeper.id())), "the note must name the other pid:\n{}", r.describe());
    assert_eq!(r.get("/limits/cpus/enforcement"), &json!("affinity"), "{}", r.describe());
    // forced: an error, with the fix.
    assert_eq!(forced.code(), 125, "{}", forced.describe());
    let msg = forced.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("Delegate=yes"), "the error must give the fix:\n{}", forced.describe());
    // Nothing created, nothing moved: the caller's cgroup is as it was.
    assert!(scope.subdirs().is_empty(), "{:?}", scope.subdirs());
});

#[test]
fn unprivileged_without_delegation_falls_back_and_says_how_to_fix() {
    let who = Who::User;
    let test = "unprivileged_without_delegation";
    if !who.ready(test) {
        return;
    }
    if cgroup_layout() != CgroupLayout::PureV2 {
        skip!(
            "SKIP: {test}: the host is not pure cgroup v2 ({:?})",
            cgroup_layout()
        );
        return;
    }
    // The test process's cgroup (not delegated to the test user): cordon cannot use it.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/")
        .to_string();
    let dir = Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/'));
    if nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok() && !running_as_root() {
        skip!(
            "SKIP: {test}: this user's cgroup {} is writable (delegated)",
            dir.display()
        );
        return;
    }
    // No session bus either: no systemd user manager to ask for a scope.
    let no_bus = std::env::temp_dir().join("cordon-test-no-bus");
    let r = Cordon::exec(
        who,
        &["--json", "--memory", "128M", "--cpus", "1"],
        &["true"],
    )
    .scope(Scope::None)
    .env("DBUS_SESSION_BUS_ADDRESS", "")
    .env("XDG_RUNTIME_DIR", &no_bus)
    .run_json();
    r.expect_ok();
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    assert!(
        note.contains("no delegated scope from the systemd user manager: no session bus")
            && note.contains(&format!("{}/bus does not exist", no_bus.display())),
        "the note must say why no scope was obtained:\n{}",
        r.describe()
    );
    assert!(
        note.contains("cgroup v2"),
        "the note must say why cgroup v2 was skipped:\n{}",
        r.describe()
    );
    assert!(
        note.contains("systemd-run --user --scope -p Delegate=yes"),
        "the note must give the fix:\n{}",
        r.describe()
    );
    assert_eq!(
        r.get("/limits/memoryBytes/enforcement"),
        &json!("rlimit"),
        "{}",
        r.describe()
    );
    assert_eq!(
        r.get("/limits/cpus/enforcement"),
        &json!("affinity"),
        "{}",
        r.describe()
    );

    let f = Cordon::new(who)
        .arg("doctor")
        .arg("--json")
        .scope(Scope::None)
        .env("DBUS_SESSION_BUS_ADDRESS", "")
        .env("XDG_RUNTIME_DIR", &no_bus)
        .run();
    let v: serde_json::Value =
        serde_json::from_slice(&f.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", f.describe()));
    assert_eq!(v["limits"]["autoBackend"], "rlimit", "{}", f.describe());
    assert_eq!(
        v["limits"]["cgroupV2"]["available"],
        false,
        "{}",
        f.describe()
    );
    let fix = v["limits"]["cgroupV2"]["fix"].as_str().unwrap_or("");
    assert!(
        fix.contains("Delegate=yes"),
        "doctor must give the fix:\n{}",
        f.describe()
    );
    // And say whether a systemd user manager could hand out a delegated scope.
    assert_eq!(
        v["limits"]["autoPath"],
        "rlimit-fallback",
        "{}",
        f.describe()
    );
    let delegation = v["limits"]["delegation"].as_str().unwrap_or("");
    assert!(
        delegation.contains("no delegated scope from a systemd user manager: no session bus"),
        "doctor must say how to get delegation:\n{}",
        f.describe()
    );
}

#[test]
fn root_in_the_root_cgroup_needs_no_leaf() {
    let test = "root_in_the_root_cgroup_needs_no_leaf";
    if !Who::Root.ready(test) || !v2_ready(Who::Root, test) {
        return;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if !own.lines().any(|l| l == "0::/") {
        skip!("SKIP: {test}: the tests do not run in the root cgroup here ({own:?})");
        return;
    }
    // The root cgroup is exempt from the no-internal-processes rule: cordon creates its
    // sandbox cgroup right there, without moving itself.
    let r = Cordon::exec(Who::Root, &["--json", "--pids", "8"], &["true"])
        .scope(Scope::None)
        .run_json();
    r.expect_ok();
    assert_v2(&r);
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    assert!(!note.contains("moved itself"), "{}", r.describe());
    let dir = sandbox_cgroup(&r);
    assert_eq!(
        dir.parent(),
        Some(Path::new("/sys/fs/cgroup")),
        "{}",
        r.describe()
    );
    assert!(!dir.exists(), "{} outlived the run", dir.display());
}

/// The scope a sandbox cgroup `<scope>/cordon-<pid>-<run>` is in.
fn scope_of(dir: &Path, r: &JsonRun) -> PathBuf {
    let scope = dir
        .parent()
        .unwrap_or_else(|| panic!("{}", r.describe()))
        .to_path_buf();
    let name = scope.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with("cordon-") && name.ends_with(".scope"),
        "{} is not cordon's scope:\n{}",
        scope.display(),
        r.describe()
    );
    scope
}

/// Waits (bounded) until systemd has removed `scope` once it holds no process.
fn assert_scope_goes(scope: &Path, r: &JsonRun) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while scope.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !scope.exists(),
        "the scope {} outlived cordon (procs {:?}):\n{}",
        scope.display(),
        std::fs::read_to_string(scope.join("cgroup.procs")),
        r.describe()
    );
}

#[test]
fn unprivileged_obtains_a_systemd_scope_from_its_user_manager() {
    let who = Who::User;
    let test = "unprivileged_obtains_a_systemd_scope";
    if !who.ready(test) || !v2_ready(who, test) {
        return;
    }
    let Some((runtime, manager, session)) = user_manager(test) else {
        return;
    };
    assert!(
        running_as_root(),
        "{test}: starting cordon in the session cgroup needs root"
    );
    let user = |opts: &[&str], cmd: &[&str]| {
        let mut all = vec!["--json"];
        all.extend(opts);
        Cordon::exec(who, &all, cmd)
            .scope(Scope::Existing(session.clone()))
            .env("DBUS_SESSION_BUS_ADDRESS", "")
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("CORDON_NO_SYSTEMD_SCOPE", "")
    };

    // A memory bomb: memory.max in a scope of the user manager's, the kill read from memory.events.
    let r = user(
        &["--memory", "64M", "--timeout", "60s"],
        &[PY, "-c", MEMORY_BOMB],
    )
    .run_json();
    assert_v2(&r);
    let dir = sandbox_cgroup(&r);
    assert!(
        dir.starts_with(&manager),
        "the sandbox cgroup {} is not in the user manager's tree {}:\n{}",
        dir.display(),
        manager.display(),
        r.describe()
    );
    assert!(!dir.starts_with(&session), "{}", r.describe());
    let scope = scope_of(&dir, &r);
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    println!("{test}: limits.backendNote: {note}");
    assert!(
        note.contains("transient scope") && note.contains("Delegate=yes"),
        "{}",
        r.describe()
    );
    assert!(
        note.contains(&session.display().to_string()),
        "the note must say why its own cgroup was not used:\n{}",
        r.describe()
    );
    assert!(
        !r.output().contains("NOT LIMITED"),
        "memory.max not enforced:\n{}",
        r.describe()
    );
    assert_eq!(r.status(), "memory_limit", "{}", r.describe());
    assert_eq!(
        r.get("/oomKilledSource"),
        &json!("cgroup-v2"),
        "{}",
        r.describe()
    );
    assert_scope_goes(&scope, &r);

    // A fork bomb: held by pids.max in a scope of its own.
    let r = user(
        &["--pids", "12", "--timeout", "30s"],
        &[PY, "-c", FORK_BOMB],
    )
    .run_json();
    assert_v2(&r);
    let dir = sandbox_cgroup(&r);
    assert!(dir.starts_with(&manager), "{}", r.describe());
    let scope2 = scope_of(&dir, &r);
    assert_ne!(scope2, scope, "each cordon gets its own scope");
    r.expect_ok();
    assert_eq!(
        r.get("/limits/pids/enforcement"),
        &json!("cgroup-v2"),
        "{}",
        r.describe()
    );
    let line = r.output().trim().to_string();
    let (forks, err) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("no fork report:\n{}", r.describe()));
    assert_eq!(
        err,
        "EAGAIN",
        "fork must fail with EAGAIN at pids.max:\n{}",
        r.describe()
    );
    let forks: u32 = forks.parse().unwrap_or_else(|_| panic!("{}", r.describe()));
    assert!(
        (1..12).contains(&forks),
        "{forks} forks under --pids 12:\n{}",
        r.describe()
    );
    assert_scope_goes(&scope2, &r);

    // doctor predicts it, without creating a scope.
    let before = std::fs::read_dir(manager.join("app.slice"))
        .map(|d| d.count())
        .unwrap_or(0);
    let f = Cordon::new(who)
        .args(["doctor", "--json"])
        .scope(Scope::Existing(session.clone()))
        .env("DBUS_SESSION_BUS_ADDRESS", "")
        .env("XDG_RUNTIME_DIR", &runtime)
        .run();
    let v: serde_json::Value =
        serde_json::from_slice(&f.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", f.describe()));
    assert_eq!(v["limits"]["autoBackend"], "cgroup-v2", "{}", f.describe());
    assert_eq!(v["limits"]["autoPath"], "systemd-scope", "{}", f.describe());
    let d = v["limits"]["delegation"].as_str().unwrap_or("");
    assert!(
        d.contains("will ask the systemd user manager"),
        "{}",
        f.describe()
    );
    let after = std::fs::read_dir(manager.join("app.slice"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(before, after, "doctor must not create a scope");
    // The text says it too.
    let f = Cordon::new(who)
        .arg("doctor")
        .scope(Scope::Existing(session.clone()))
        .env("DBUS_SESSION_BUS_ADDRESS", "")
        .env("XDG_RUNTIME_DIR", &runtime)
        .run();
    let text = f.stdout_str();
    let line = text
        .lines()
        .find(|l| l.contains("limits: cordon exec will use"))
        .unwrap_or_else(|| panic!("no limits line:\n{}", f.describe()));
    println!("{test}: doctor: {line}");
    assert!(
        line.contains("cgroup-v2 in a transient scope with Delegate=yes"),
        "{}",
        f.describe()
    );
    assert!(line.contains("path systemd-scope"), "{}", f.describe());

    // Opted out: rlimits, and the note says why.
    let r = user(&["--memory", "64M"], &["true"])
        .env("CORDON_NO_SYSTEMD_SCOPE", "1")
        .run_json();
    r.expect_ok();
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    assert!(note.contains("CORDON_NO_SYSTEMD_SCOPE"), "{}", r.describe());
}

#[test]
fn unprivileged_with_a_dead_session_bus_falls_back_with_the_bus_error() {
    let who = Who::User;
    let test = "unprivileged_with_a_dead_session_bus";
    if !who.ready(test) || cgroup_layout() != CgroupLayout::PureV2 {
        skip!("SKIP: {test}: needs the test user on a pure cgroup v2 host");
        return;
    }
    let r = Cordon::exec(
        who,
        &["--json", "--memory", "128M", "--pids", "16"],
        &["true"],
    )
    .scope(Scope::None)
    .env(
        "DBUS_SESSION_BUS_ADDRESS",
        "unix:path=/nonexistent/cordon-test-bus",
    )
    .env("CORDON_NO_SYSTEMD_SCOPE", "")
    .run_json();
    r.expect_ok();
    if r.backend() == "cgroup-v2" {
        skip!("SKIP: {test}: the test process's cgroup is delegated to the test user");
        return;
    }
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    assert!(
        note.contains("no delegated scope from the systemd user manager"),
        "{}",
        r.describe()
    );
    let busctl = ["/usr/bin/busctl", "/bin/busctl"]
        .iter()
        .any(|p| Path::new(p).exists());
    if busctl {
        // busctl's own words, and the bus address it tried.
        assert!(
            note.contains("Failed to connect to bus"),
            "{}",
            r.describe()
        );
        assert!(
            note.contains("/nonexistent/cordon-test-bus"),
            "{}",
            r.describe()
        );
    } else {
        assert!(
            note.contains("busctl (part of systemd) not found"),
            "{}",
            r.describe()
        );
    }
    assert!(
        note.contains("Delegate=memory pids cpu"),
        "the fix:\n{}",
        r.describe()
    );
    assert_eq!(
        r.get("/limits/memoryBytes/enforcement"),
        &json!("rlimit"),
        "{}",
        r.describe()
    );
    assert_eq!(
        r.get("/limits/pids/enforcement"),
        &json!("rlimit"),
        "{}",
        r.describe()
    );
}

#[test]
fn unprivileged_whose_scope_job_fails_falls_back_with_the_reason() {
    let who = Who::User;
    let test = "unprivileged_whose_scope_job_fails";
    if !who.ready(test) || !v2_ready(who, test) {
        return;
    }
    let Some((runtime, manager, _session)) = user_manager(test) else {
        return;
    };
    // The test process's cgroup is outside the user manager's tree and not the user's: the
    // manager accepts the scope but cannot move cordon into it (on a real host it would ask
    // the system manager, which this guest does not have), so the job fails.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/")
        .to_string();
    let own_dir = Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/'));
    if own_dir.starts_with(&manager) {
        skip!("SKIP: {test}: the tests run inside the user manager's tree");
        return;
    }
    let r = Cordon::exec(who, &["--json", "--memory", "64M"], &["true"])
        .scope(Scope::None)
        .env("DBUS_SESSION_BUS_ADDRESS", "")
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("CORDON_NO_SYSTEMD_SCOPE", "")
        .run_json();
    r.expect_ok();
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    let note = r.get("/limits/backendNote").as_str().unwrap_or("");
    println!("{test}: limits.backendNote: {note}");
    assert!(
        note.contains("no delegated scope from the systemd user manager"),
        "{}",
        r.describe()
    );
    assert!(note.contains("was not moved into it"), "{}", r.describe());
    // The job's end ends the wait: the fallback does not wait out the whole 5 s.
    assert!(
        note.contains("its job ended after") && note.contains("no move followed within"),
        "{}",
        r.describe()
    );
    assert_eq!(
        r.get("/limits/memoryBytes/enforcement"),
        &json!("rlimit"),
        "{}",
        r.describe()
    );
    // The failed scope does not linger (CollectMode=inactive-or-failed).
    let unit = note
        .split_once("accepted ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the note names no scope:\n{}", r.describe()));
    assert!(
        unit.starts_with("cordon-") && unit.ends_with(".scope"),
        "{unit}:\n{}",
        r.describe()
    );
    let dir = manager.join("app.slice").join(unit);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while dir.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !dir.exists(),
        "the failed scope {} lingers:\n{}",
        dir.display(),
        r.describe()
    );
}

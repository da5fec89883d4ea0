//! `cordon-oci`: the OCI lifecycle, config mapping and hooks, on a busybox bundle, as root
//! and (rootless OCI) as the unprivileged test user.

#[macro_use]
mod common;

use common::{
    CgroupLayout, SCOPE_SCRIPT, Who, cgroup_layout, cgroup_scopes, running_as_root, shared_tempdir,
    test_user, user_manager,
};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The cordon-oci binary, copied where the test user can execute it.
fn oci_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("cordon-test-bin.")
            .tempdir_in("/tmp")
            .unwrap()
            .keep();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dst = dir.join("cordon-oci");
        std::fs::copy(env!("CARGO_BIN_EXE_cordon-oci"), &dst).unwrap();
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
        dst
    })
}

/// ETXTBSY on Linux.
fn libc_etxtbsy() -> i32 {
    26
}

fn busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Whether CI asked for every test to run (`CORDON_TEST_REQUIRE_USER=1`, as
/// `common::toolchain_ready` reads it): what a test needs being missing is then a failure.
fn require_everything() -> bool {
    std::env::var("CORDON_TEST_REQUIRE_USER").as_deref() == Ok("1")
}

/// The busybox `found` for a bundle; none is a SKIP, or, when `required` (CI, which installs
/// busybox-static), a panic: a broken install step must not turn the OCI tests into skips.
fn busybox_ready(found: Option<PathBuf>, required: bool) -> Option<PathBuf> {
    if found.is_none() {
        if required {
            panic!(
                "busybox is missing (/bin/busybox, /usr/bin/busybox) and CORDON_TEST_REQUIRE_USER=1: .ci/run installs it (apt-get install busybox-static)"
            );
        }
        skip!("SKIP: busybox not installed (apt-get install busybox-static)");
    }
    found
}

// Item 10 of the second OCI review: a missing busybox was a SKIP even under
// CORDON_TEST_REQUIRE_USER=1 (CI), so a broken install step made every OCI test a green skip.
#[test]
#[should_panic(expected = "CORDON_TEST_REQUIRE_USER=1")]
fn a_missing_busybox_fails_when_everything_is_required() {
    busybox_ready(None, true);
}

#[test]
fn a_missing_busybox_is_a_skip_otherwise() {
    assert_eq!(busybox_ready(None, false), None);
    let bb = PathBuf::from("/bin/busybox");
    assert_eq!(busybox_ready(Some(bb.clone()), true), Some(bb));
}

/// A bundle: rootfs with busybox and its applets, config.json from `cordon-oci spec`
/// (`--rootless` for the user), edited by `edit`. Owned by whoever runs cordon-oci.
struct Bundle {
    dir: tempfile::TempDir,
    who: Who,
}

impl Bundle {
    fn new(who: Who, args: &[&str], edit: impl FnOnce(&mut Value)) -> Option<Bundle> {
        let bb = busybox_ready(busybox(), require_everything())?;
        let dir = shared_tempdir();
        let bin = dir.path().join("rootfs/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(&bb, bin.join("busybox")).unwrap();
        for applet in [
            "sh", "cat", "echo", "sleep", "id", "ls", "mkdir", "touch", "wc", "true", "hostname",
            "readlink",
        ] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
        }
        let b = Bundle { dir, who };
        let mut spec_args = vec!["spec", "--bundle"];
        let path = b.path().to_str().unwrap().to_string();
        spec_args.push(&path);
        if who == Who::User {
            spec_args.push("--rootless");
            b.chown();
        }
        let out = b.oci(&spec_args);
        assert!(out.status.success(), "spec: {}", describe(&out));
        let cfg_path = b.path().join("config.json");
        let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
        cfg["process"]["terminal"] = json!(false);
        cfg["process"]["args"] = json!(args);
        // This host may lack CAP_SYS_RESOURCE: keep rlimits at or below the caller's.
        cfg["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]);
        edit(&mut cfg);
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
        if who == Who::User {
            b.chown();
        }
        Some(b)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn state_root(&self) -> PathBuf {
        self.path().join("state")
    }

    fn chown(&self) {
        if running_as_root() {
            let u = test_user().unwrap();
            let st = Command::new("chown")
                .args(["-R", &format!("{}:{}", u.uid, u.gid)])
                .arg(self.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
    }

    /// cordon-oci as `self.who`; with `$CORDON_TEST_CGROUP_SCOPES` (the cgroup v2 guest of
    /// scripts/vm-test) each invocation starts in a fresh cgroup delegated to that user, as
    /// `systemd-run [--user] --scope -p Delegate=yes cordon-oci ...` would start it.
    fn command(&self, args: &[&str]) -> Command {
        self.command_under(&[], args)
    }

    /// cordon-oci as `self.who`, started by `prefix` (`unshare ...`), which then execs it.
    fn command_under(&self, prefix: &[&str], args: &[&str]) -> Command {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let (Some(scopes), true) = (cgroup_scopes(), running_as_root()) {
            let owner = format!("{}:{}", self.who.caller_uid(), self.who.caller_gid());
            argv.extend(["sh", "-c", SCOPE_SCRIPT, "sh"].map(Into::into));
            argv.push(scopes.join(self.who.scope_dir()).into());
            argv.extend(["new".into(), owner.into()]);
        }
        if self.who == Who::User && running_as_root() {
            let u = test_user().unwrap();
            argv.push("setpriv".into());
            argv.push(format!("--reuid={}", u.uid).into());
            argv.push(format!("--regid={}", u.gid).into());
            argv.push("--clear-groups".into());
        }
        argv.extend(prefix.iter().map(Into::into));
        argv.push(oci_bin().into());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd.arg("--root")
            .arg(self.state_root())
            .args(args)
            .current_dir("/")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs cordon-oci with a deadline. Its output goes through files: after `create` the
    /// container's process keeps cordon-oci's stdout and stderr open.
    fn oci(&self, args: &[&str]) -> Output {
        self.oci_under(&[], args)
    }

    /// [`Bundle::oci`], started by `prefix` ([`Bundle::command_under`]).
    fn oci_under(&self, prefix: &[&str], args: &[&str]) -> Output {
        self.output_of(|| self.command_under(prefix, args), args)
    }

    /// The test user's cordon-oci started in `session` (an existing cgroup it does not own,
    /// as a login session's is), with `env` added; not in a delegated cgroup of
    /// `$CORDON_TEST_CGROUP_SCOPES`.
    fn oci_in_session(&self, session: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
        let command = || {
            let mut cmd = user_in_cgroup(session, env);
            cmd.arg(oci_bin())
                .arg("--root")
                .arg(self.state_root())
                .args(args);
            cmd
        };
        self.output_of(command, args)
    }

    /// Runs the command `command` makes (cordon-oci `args`), with a deadline.
    fn output_of(&self, command: impl Fn() -> Command, args: &[&str]) -> Output {
        let out_dir = tempfile::tempdir().unwrap();
        let (o, e) = (out_dir.path().join("out"), out_dir.path().join("err"));
        // ETXTBSY: another test thread may be forking while the binary's copy is still open
        // for writing in this one (the copy is made once, on first use); retry briefly.
        let mut tries = 0;
        let mut child = loop {
            match command()
                .stdout(std::fs::File::create(&o).unwrap())
                .stderr(std::fs::File::create(&e).unwrap())
                .spawn()
            {
                Ok(c) => break c,
                Err(err) if err.raw_os_error() == Some(libc_etxtbsy()) && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(err) => panic!("spawn cordon-oci {args:?}: {err}"),
            }
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("cordon-oci {args:?} hung");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Output {
            status: child.wait().unwrap(),
            stdout: std::fs::read(&o).unwrap(),
            stderr: std::fs::read(&e).unwrap(),
        }
    }

    fn bundle_args<'a>(&'a self, cmd: &'a str, id: &'a str) -> Vec<String> {
        vec![
            cmd.into(),
            "--bundle".into(),
            self.path().display().to_string(),
            id.into(),
        ]
    }

    /// `run --detach`s container `id`, which must succeed.
    fn run_detached(&self, id: &str) {
        let mut a = self.bundle_args("run", id);
        a.insert(1, "--detach".into());
        let out = self.oci(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "run --detach {id}: {}",
            describe(&out)
        );
    }

    /// Writes `process` as process.json in the bundle (for `exec --process`), readable by the
    /// caller of cordon-oci; returns its path.
    fn process_file(&self, who: Who, process: &Value) -> PathBuf {
        let p = self.path().join("process.json");
        std::fs::write(&p, serde_json::to_vec(process).unwrap()).unwrap();
        if who == Who::User {
            self.chown();
        }
        p
    }

    /// `create`s container `id` (which must succeed) and returns its init's pid.
    fn create(&self, id: &str) -> i64 {
        let a = self.bundle_args("create", id);
        let out = self.oci(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "create {id}: {}", describe(&out));
        self.state(id)["pid"].as_i64().unwrap()
    }

    fn run(&self, id: &str) -> Output {
        let a = self.bundle_args("run", id);
        self.oci(&a.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// `update -r FILE id`, FILE holding `json` (linux.resources).
    fn update_resources(&self, id: &str, json: &str) -> Output {
        let f = self.path().join(format!("resources-{id}.json"));
        std::fs::write(&f, json).unwrap();
        self.oci(&["update", "-r", f.to_str().unwrap(), id])
    }

    fn state(&self, id: &str) -> Value {
        let out = self.oci(&["state", id]);
        assert!(out.status.success(), "state: {}", describe(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn wait_status(&self, id: &str, want: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.state(id);
            if s["status"] == want || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A process a test started (a namespace holder), killed and reaped however the test ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A container a test made, deleted (`delete --force`) however the test ends.
/// `sh` that moves itself (as root) into the existing cgroup `cgroup`, then runs what the
/// caller appends as the test user, with `env` added: a login session's process, whose
/// cgroup is not the user's.
fn user_in_cgroup(cgroup: &Path, env: &[(&str, &str)]) -> Command {
    let u = test_user().unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", SCOPE_SCRIPT, "sh"])
        .arg(cgroup)
        .args(["existing", "0:0", "setpriv"])
        .arg(format!("--reuid={}", u.uid))
        .arg(format!("--regid={}", u.gid))
        .args(["--clear-groups", "env"])
        .args(env.iter().map(|(k, v)| format!("{k}={v}")))
        .current_dir("/")
        .stdin(Stdio::null());
    cmd
}

/// For the tests of rootless `--systemd-cgroup`: as the test user, on a pure cgroup v2 host,
/// with scripts/vm-test's systemd user manager (its runtime directory, cgroup, and the
/// session cgroup to start in), else None with a SKIP line.
fn user_manager_on_v2(test: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    if !Who::User.ready(test) {
        return None;
    }
    if cgroup_layout() != CgroupLayout::PureV2 {
        skip!(
            "SKIP: {test}: needs a pure cgroup v2 host with a systemd user manager (scripts/vm-test's guest)"
        );
        return None;
    }
    let found = user_manager(test)?;
    assert!(
        running_as_root(),
        "{test}: starting the user's processes in the session cgroup needs root"
    );
    Some(found)
}

/// A systemd scope removes itself once nothing of it runs: `scope` must be gone within 10 s
/// of its container's delete.
fn assert_gone_soon(scope: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while scope.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !scope.exists(),
        "{} outlived the deleted container",
        scope.display()
    );
}

/// A delete of a container with a systemd scope succeeded and asked the manager to stop the
/// scope (it warns when it could not).
fn assert_deleted_with_its_scope(out: &std::process::Output) {
    assert!(
        out.status.success()
            && !String::from_utf8_lossy(&out.stderr).contains("cannot stop the systemd scope"),
        "delete: {}",
        describe(out)
    );
}

/// The bundle's root filesystem as a tar file (for `podman import`), owned by the bundle's
/// user.
fn rootfs_tar(b: &Bundle) -> PathBuf {
    let tar = b.path().join("rootfs.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(b.path().join("rootfs"))
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    b.chown();
    tar
}

struct Deleted<'a>(&'a Bundle, String);

impl Drop for Deleted<'_> {
    fn drop(&mut self) {
        let _ = self.0.oci(&["delete", "--force", &self.1]);
    }
}

/// A process a test started and keeps using (a foreground `run`): SIGKILLed however the
/// test ends (the test reaps it when it gets that far).
struct KilledOnDrop(nix::unistd::Pid);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Polls `ready` every 10 ms until it gives a value; fails the test after 5 s, saying
/// `what` did not happen.
fn wait_until<T>(what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = ready() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn describe(o: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

both!(fn create_start_kill_delete(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    // Ids differ per variant: both run at once, and a container's default cgroup is named
    // after its id.
    let c1 = format!("c1-{who:?}");
    let c1 = c1.as_str();
    let pid_file = b.path().join("pid");
    let mut args = b.bundle_args("create", c1);
    args.insert(1, "--pid-file".into());
    args.insert(2, pid_file.display().to_string());
    let out = b.oci(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "create: {}", describe(&out));
    let s = b.state(c1);
    assert_eq!(s["status"], "created", "{s}");
    assert_eq!(s["id"], c1);
    assert_eq!(s["bundle"], b.path().display().to_string());
    let pid: i64 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert_eq!(s["pid"], pid);
    // runc's fields beside the spec's (go-runc reads them): the root directory, the
    // creation time (RFC 3339, UTC) and the creator's name.
    let rootfs = std::fs::canonicalize(b.path().join("rootfs")).unwrap();
    assert_eq!(s["rootfs"], rootfs.display().to_string(), "{s}");
    let created = s["created"].as_str().unwrap_or_default().as_bytes();
    let year = Command::new("date").args(["-u", "+%Y"]).output().unwrap().stdout;
    assert!(
        created.len() >= 20
            && created.starts_with(&year[..4])
            && created[4] == b'-'
            && created[10] == b'T'
            && created[13] == b':'
            && created.ends_with(b"Z"),
        "{s}"
    );
    let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(who.caller_uid()))
        .unwrap()
        .unwrap()
        .name;
    assert_eq!(s["owner"], owner, "{s}");
    // Before start the process is cordon's init, not yet `sleep`.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_ne!(comm.trim(), "sleep");
    // A second create of the same id fails.
    let again = b.oci(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!again.status.success(), "second create of c1 succeeded");

    let out = b.oci(&["start", c1]);
    assert!(out.status.success(), "start: {}", describe(&out));
    let s = b.wait_status(c1, "running");
    assert_eq!(s["status"], "running", "{s}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim() != "sleep" {
        assert!(Instant::now() < deadline, "the container never exec'd sleep");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = b.oci(&["delete", c1]);
    assert!(!out.status.success(), "delete of a running container succeeded");
    assert_eq!(b.state(c1)["status"], "running");

    let out = b.oci(&["kill", c1, "KILL"]);
    assert!(out.status.success(), "kill: {}", describe(&out));
    // The test process is no subreaper: the container's init is reparented to pid 1, which
    // reaps it; state must read stopped either way (zombie or gone).
    let s = b.wait_status(c1, "stopped");
    assert_eq!(s["status"], "stopped", "{s}");
    assert!(s.get("pid").is_none(), "{s}");
    let out = b.oci(&["delete", c1]);
    assert!(out.status.success(), "delete: {}", describe(&out));
    let out = b.oci(&["state", c1]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"), "{}", describe(&out));
});

// `delete` of a created container (never started) is an error without --force and changes
// nothing (the runtime spec's MUST, which runtime-tools' delete test checks; runc deletes
// it); --force deletes it, and `delete --force` of a container that does not exist
// succeeds, as with runc.
both!(fn delete_of_a_created_container_needs_force_and_force_of_a_missing_one_succeeds(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    let id = format!("delcreated-{who:?}");
    let _d = Deleted(&b, id.clone());
    let pid = b.create(&id);
    let out = b.oci(&["delete", &id]);
    assert!(!out.status.success(), "delete of a created container without --force: {}", describe(&out));
    assert_eq!(b.state(&id)["status"], "created", "a refused delete changed the container");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "delete --force of a created container: {}", describe(&out));
    let out = b.oci(&["state", &id]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"), "{}", describe(&out));
    // Its init is gone (or a zombie until the test's pid 1 reaps it), not left waiting.
    wait_until("the created container's init outlived its delete", || {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (st.is_empty() || st.contains(") Z ")).then_some(())
    });
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "delete --force of a missing container: {}", describe(&out));
    let out = b.oci(&["delete", &id]);
    assert!(!out.status.success(), "delete of a missing container succeeded");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"), "{}", describe(&out));
});

// Item 4 of the second OCI review: `kill --all` of a stopped container was an error and
// signalled nothing. Now, as runc, it signals what is left in the container's cgroup, with
// no error; without --all the error says "container not running" (containerd matches it).
// Without a pid namespace, a process the container's init left behind outlives it there.
both!(fn kill_all_of_a_stopped_container_signals_its_cgroup(who) {
    // Root's container gets a cgroup on every host; an unprivileged one, without a pid
    // namespace, could not mount /proc: the user's keeps its pid namespace, and so nothing
    // outlives its init.
    let leftover = who == Who::Root;
    let Some(b) = Bundle::new(who, &["sh", "-c", "sleep 61 & echo $! >/left; exit 0"], |c| {
        if leftover {
            c["linux"]["namespaces"].as_array_mut().unwrap().retain(|n| n["type"] != "pid");
        }
        c["root"]["readonly"] = json!(false);
    }) else { return };
    let id = format!("killall-{who:?}");
    let _d = Deleted(&b, id.clone());
    b.create(&id);
    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "start: {}", describe(&out));
    let s = b.wait_status(&id, "stopped");
    assert_eq!(s["status"], "stopped", "{s}");
    let out = b.oci(&["kill", &id, "KILL"]);
    assert!(!out.status.success(), "kill of a stopped container succeeded");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("container not running"),
        "{}",
        describe(&out)
    );
    let left: Option<i32> = leftover.then(|| {
        wait_until("the container's sleep did not start", || {
            std::fs::read_to_string(b.path().join("rootfs/left")).ok()?.trim().parse().ok()
        })
    });
    let out = b.oci(&["kill", "--all", &id, "KILL"]);
    assert!(out.status.success(), "kill --all of a stopped container: {}", describe(&out));
    if let Some(left) = left {
        wait_until("kill --all left the container's sleep alive", || {
            let st = std::fs::read_to_string(format!("/proc/{left}/stat")).unwrap_or_default();
            (st.is_empty() || st.contains(") Z ")).then_some(())
        });
    }
});

// Item 5 of the second OCI review: the container's processes kept the caller's session
// keyring (as if --no-new-keyring were always given), so they could read its keys. Now, as
// runc, they get a new one; --no-new-keyring keeps the caller's. The caller (this test's
// thread) joins a keyring of a name of its own, which the container must not possess: root's
// container runs as uid 1000, which sees uid 0's keyring in /proc/keys only by possessing it.
// As root only: a rootless container's /proc/keys hides the caller's keyring (root's, in the
// host's user namespace) and shows the `_ses` keyrings of the test user's other containers,
// which tests running at the same time make, so the user's view proves nothing either way.
#[test]
fn the_container_gets_a_session_keyring_of_its_own() {
    if !running_as_root() {
        skip!("SKIP: the_container_gets_a_session_keyring_of_its_own: needs root");
        return;
    }
    let who = Who::Root;
    let Some(b) = Bundle::new(who, &["cat", "/proc/keys"], |c| {
        c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        c["linux"]["maskedPaths"]
            .as_array_mut()
            .unwrap()
            .retain(|p| p != "/proc/keys");
    }) else {
        return;
    };
    let name = format!("cordon-test-caller-{who:?}-{}", std::process::id());
    let cname = std::ffi::CString::new(name.clone()).unwrap();
    if let Err(err) = cordon::sys::join_session_keyring(Some(&cname)) {
        skip!("SKIP: the_container_gets_a_session_keyring_of_its_own: keyctl: {err}");
        return;
    }
    let out = b.run(&format!("keyring-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    let keys = String::from_utf8_lossy(&out.stdout);
    assert!(
        !keys.contains(&name),
        "the container has the caller's session keyring: {}",
        describe(&out)
    );
    assert!(
        keys.contains("_ses"),
        "no session keyring of its own: {}",
        describe(&out)
    );
    let path = b.path().display().to_string();
    let id = format!("keyring-keep-{who:?}");
    let out = b.oci(&["run", "--no-new-keyring", "--bundle", &path, &id]);
    assert!(out.status.success(), "{}", describe(&out));
    let keys = String::from_utf8_lossy(&out.stdout);
    assert!(
        keys.contains(&name),
        "--no-new-keyring did not keep the caller's session keyring: {}",
        describe(&out)
    );
}

// Resources of 0 are unset (as runc reads them), also when deciding whether the container
// needs a cgroup: a rootless container that gets none here (cgroup v1 cannot be delegated)
// runs with `memory.limit: 0`, `cpu.shares: 0` and an empty `pids`-free config, where any
// real limit would be refused.
both!(fn zero_resources_ask_for_no_cgroup(who) {
    let Some(b) = Bundle::new(who, &["echo", "ran"], |c| {
        c["linux"]["resources"] = json!({"memory": {"limit": 0, "kernel": 0}, "cpu": {"shares": 0}});
    }) else { return };
    let out = b.run(&format!("zero-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n", "{}", describe(&out));
});

// Item 6 of the second OCI review: without process.user.umask the container's process took
// cordon-oci's caller's umask. Now it is 0022, as with runc; the config's when it gives one.
both!(fn the_umask_is_the_configs_or_0022(who) {
    for (umask, want) in [(None, "0022"), (Some(0o027), "0027")] {
        let Some(b) = Bundle::new(who, &["sh", "-c", "umask"], |c| {
            if let Some(u) = umask {
                c["process"]["user"]["umask"] = json!(u);
            }
        }) else { return };
        let a = b.bundle_args("run", "umask");
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = b.oci_under(&["sh", "-c", "umask 077; exec \"$@\"", "sh"], &a);
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want, "{}", describe(&out));
    }
});

both!(fn run_passes_exit_code_and_output(who) {
    let Some(b) = Bundle::new(who, &["sh", "-c", "echo out-$(id -u); exit 7"], |_| {}) else { return };
    let out = b.run("r1");
    assert_eq!(out.status.code(), Some(7), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out-0\n");
    // run deletes the container afterwards.
    assert!(!b.oci(&["state", "r1"]).status.success());
});

both!(fn unsupported_field_is_named(who) {
    let Some(b) = Bundle::new(who, &["true"], |c| {
        c["linux"]["intelRdt"] = json!({"closID": "x"});
    }) else { return };
    let out = b.run("u1");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`linux.intelRdt`"), "{}", describe(&out));
    // Nothing is left behind.
    assert!(!b.oci(&["state", "u1"]).status.success());
});

both!(fn seccomp_errno(who) {
    let Some(b) = Bundle::new(who, &["sh", "-c", "mkdir /tmp/x"], |c| {
        c["mounts"].as_array_mut().unwrap().push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}));
        c["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]
        });
    }) else { return };
    let out = b.run("s1");
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Function not implemented"),
        "mkdir did not get ENOSYS: {}",
        describe(&out)
    );
});

// podman's `container checkpoint` and `restore` call runc's commands of those names: cordon-oci
// says it has none and what to use, whatever their flags.
#[test]
fn checkpoint_and_restore_say_they_are_not_implemented() {
    for args in [
        &[
            "checkpoint",
            "--image-path",
            "/tmp/x",
            "--leave-running",
            "c1",
        ][..],
        &["restore", "--bundle", "/b", "-d", "c1"][..],
    ] {
        let out = Command::new(oci_bin()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && err.contains("not implemented") && err.contains("CRIU"),
            "{args:?}: {}",
            describe(&out)
        );
    }
}

/// A static i386 program of 100 bytes: `getpid()` through `int 0x80` (i386 number 20;
/// x86_64's getpid is 39), then `exit(that pid)`, so its exit status is its pid (1 as a pid
/// namespace's init) or, when a filter answers an errno, 256 minus it.
fn i386_getpid_program() -> Vec<u8> {
    let code = [
        0xb8, 20, 0, 0, 0, // mov eax, 20 (getpid)
        0xcd, 0x80, // int 0x80
        0x89, 0xc3, // mov ebx, eax
        0xb8, 1, 0, 0, 0, // mov eax, 1 (exit)
        0xcd, 0x80, // int 0x80
    ];
    let base: u32 = 0x0804_8000;
    let total = (52 + 32 + code.len()) as u32;
    let mut elf = b"\x7fELF\x01\x01\x01".to_vec();
    elf.resize(16, 0);
    for h in [2u16, 3] {
        elf.extend(h.to_le_bytes()); // ET_EXEC, EM_386
    }
    for w in [1u32, base + 84, 52, 0, 0] {
        elf.extend(w.to_le_bytes()); // version, entry, phoff, shoff, flags
    }
    for h in [52u16, 32, 1, 0, 0, 0] {
        elf.extend(h.to_le_bytes()); // ehsize, phentsize, phnum, sh*
    }
    for w in [1u32, 0, base, base, total, total, 5, 0x1000] {
        elf.extend(w.to_le_bytes()); // PT_LOAD of the whole file, R+X
    }
    elf.extend(code);
    elf
}

// A 32-bit (i386) program's calls, which seccomp sees as another architecture, get the
// policy's rules by their i386 numbers when `architectures` lists SCMP_ARCH_X86 (as
// podman's and Docker's default profiles do, and as runc and crun honour), and are killed
// when it does not.
both!(fn seccomp_filters_i386_calls_when_the_policy_lists_x86(who) {
    let test = "seccomp_filters_i386_calls_when_the_policy_lists_x86";
    let prog = common::shared_tempdir();
    let host_copy = prog.path().join("getpid32");
    std::fs::write(&host_copy, i386_getpid_program()).unwrap();
    std::fs::set_permissions(&host_copy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    match Command::new(&host_copy).status() {
        Ok(st) if st.code().is_some() => {}
        other => {
            eprintln!("SKIP: {test}: this kernel runs no 32-bit programs ({other:?}): CONFIG_IA32_EMULATION is off or ia32_emulation=0");
            return;
        }
    }
    let cases: [(&str, Value, i32); 3] = [
        // No rule for getpid: allowed, the pid (1).
        ("i386-allow", json!({"defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ERRNO"}]}), 1),
        // getpid refused with ENOSYS (38): 256 - 38.
        ("i386-errno", json!({"defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
            "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]}), 218),
        // i386 not listed: killed (SIGSYS, 128 + 31).
        ("i386-killed", json!({"defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ERRNO"}]}), 159),
    ];
    for (name, policy, want) in cases {
        let Some(b) = Bundle::new(who, &["/bin/getpid32"], |c| c["linux"]["seccomp"] = policy.clone()) else { return };
        std::fs::copy(&host_copy, b.path().join("rootfs/bin/getpid32")).unwrap();
        let out = b.run(&format!("{name}-{who:?}"));
        assert_eq!(out.status.code(), Some(want), "{name}: {}", describe(&out));
    }
});

// A readonlyPath is bound onto itself recursively, which copies its submounts writable; a
// remount of the top made only that one read-only (the tmpfs at /data/sub stayed writable).
both!(fn readonly_paths_cover_the_mounts_below(who) {
    let script = "touch /data/top 2>/dev/null && echo WROTE_TOP; touch /data/sub/x 2>/dev/null && echo WROTE_SUB; \
                  grep ' /data' /proc/self/mountinfo | cut -d' ' -f5,6";
    let Some(b) = Bundle::new(who, &["sh", "-c", script], |c| {
        let m = c["mounts"].as_array_mut().unwrap();
        m.push(json!({"destination": "/data", "type": "tmpfs", "source": "tmpfs"}));
        m.push(json!({"destination": "/data/sub", "type": "tmpfs", "source": "tmpfs"}));
        c["linux"]["readonlyPaths"] = json!(["/data"]);
    }) else { return };
    let out = b.run(&format!("ro-below-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("WROTE"), "a mount below a readonlyPath was writable: {}", describe(&out));
    // Both mounts (the tmpfs and the one below it), as the container sees them: read-only.
    let lines: Vec<&str> = stdout.lines().collect();
    for point in ["/data", "/data/sub"] {
        let top = lines.iter().rev().find(|l| l.split(' ').next() == Some(point));
        let opts = top.unwrap_or_else(|| panic!("no mount at {point}: {}", describe(&out)));
        assert!(opts.split(' ').nth(1).unwrap().split(',').any(|o| o == "ro"), "{opts}: {}", describe(&out));
    }
});

both!(fn masked_and_readonly_paths(who) {
    let Some(b) = Bundle::new(
        who,
        &["sh", "-c", "wc -c < /proc/version; echo x > /proc/sys/kernel/domainname && echo wrote; touch /newfile && echo wrote-root; touch -c /proc/version && echo wrote-mask; hostname"],
        |c| {
            c["linux"]["maskedPaths"] = json!(["/proc/version"]);
            c["linux"]["readonlyPaths"] = json!(["/proc/sys"]);
            c["root"]["readonly"] = json!(true);
            c["hostname"] = json!("oci-test");
        },
    ) else { return };
    let out = b.run("m1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("0\n"), "/proc/version is not masked: {}", describe(&out));
    assert!(!stdout.contains("wrote"), "a read-only path was writable: {}", describe(&out));
    assert!(stdout.ends_with("oci-test\n"), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Read-only file system"), "{}", describe(&out));
});

// linux.personality: LINUX32 makes uname report a 32-bit machine (as crun); flags, which
// the runtime spec defines none of, are refused.
both!(fn personality_linux32_is_set(who) {
    let Some(b) = Bundle::new(who, &["busybox", "uname", "-m"], |c| {
        c["linux"]["personality"] = json!({"domain": "LINUX32"});
    }) else { return };
    let out = b.run(&format!("pers-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "i686", "{}", describe(&out));
    let Some(b) = Bundle::new(who, &["true"], |c| {
        c["linux"]["personality"] = json!({"domain": "LINUX", "flags": ["X"]});
    }) else { return };
    let out = b.run(&format!("persf-{who:?}"));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("linux.personality.flags"), "{}", describe(&out));
});

// A mount may not land inside /proc, where cordon-oci writes as the container's root
// (sysctls, masks): not by its destination, nor through a symlink of the image (a volume at
// `/data -> /proc/sys/net` would turn the write of net.ipv4.ping_group_range, which podman
// sets, onto whatever host file a symlink in the volume names). The binds lxcfs makes (on
// /proc/meminfo and the like) still work.
both!(fn a_mount_inside_proc_is_refused_even_through_a_symlink(who) {
    let vol = common::shared_tempdir();
    std::fs::create_dir(vol.path().join("ipv4")).unwrap();
    for (id, dst) in [("procsym", "/data"), ("procdirect", "/proc/sys/net")] {
        let Some(b) = Bundle::new(who, &["true"], |c| {
            c["mounts"].as_array_mut().unwrap().push(
                json!({"destination": dst, "type": "bind", "source": vol.path(), "options": ["rbind"]}),
            );
            c["linux"]["sysctl"] = json!({"net.ipv4.ping_group_range": "0 0"});
            let ns = c["linux"]["namespaces"].as_array_mut().unwrap();
            if !ns.iter().any(|n| n["type"] == "network") {
                ns.push(json!({"type": "network"}));
            }
        }) else { return };
        std::os::unix::fs::symlink("/proc/sys/net", b.path().join("rootfs/data")).unwrap();
        b.chown();
        let out = b.run(&format!("{id}-{who:?}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}", describe(&out));
        assert!(err.contains(&format!("destination {dst}")) && err.contains("may not go inside /proc"), "{}", describe(&out));
        if dst == "/data" {
            assert!(err.contains("leads to /proc/sys/net"), "{}", describe(&out));
        }
    }
    // A bind of a procfs on /proc (CRI-O binds the host's for host-pid containers): allowed.
    let Some(b) = Bundle::new(who, &["cat", "/proc/1/comm"], |c| {
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/proc", "type": "bind", "source": "/proc", "options": ["rbind"]}),
        );
    }) else { return };
    let out = b.run(&format!("procbind-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    let host_init = std::fs::read_to_string("/proc/1/comm").unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), host_init, "{}", describe(&out));
    let meminfo = vol.path().join("meminfo");
    common::write_world_readable(&meminfo, b"MemTotal: 4 kB\n");
    let Some(b) = Bundle::new(who, &["cat", "/proc/meminfo"], |c| {
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/proc/meminfo", "type": "bind", "source": meminfo, "options": ["bind", "ro"]}),
        );
    }) else { return };
    let out = b.run(&format!("lxcfs-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "MemTotal: 4 kB\n", "{}", describe(&out));
});

// The image decides what is at /dev/null when a mount of its covers /dev, or when there is
// no /dev tmpfs: cordon-oci never follows procfs' magic links while placing the devices (a
// `null -> /proc/1/cwd/X` read before the pivot names the host's working directory, after it
// the root), and masks only with a /dev/null that is the null device itself, so a mask can
// never be a bind of a file the image chose (runc's CVE-2025-31133).
both!(fn masks_use_only_a_real_null_device(who) {
    let marker = "IMAGE-FILE";
    // A mount over /dev, reached through the image's `/x -> /dev`, whose null is a magic link.
    let vol = common::shared_tempdir();
    std::os::unix::fs::symlink("/proc/1/cwd/X", vol.path().join("null")).unwrap();
    let Some(b) = Bundle::new(who, &["cat", "/proc/keys"], |c| {
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/x", "type": "bind", "source": vol.path(), "options": ["rbind"]}),
        );
        c["linux"]["maskedPaths"] = json!(["/proc/keys"]);
    }) else { return };
    std::os::unix::fs::symlink("/dev", b.path().join("rootfs/x")).unwrap();
    common::write_world_readable(&b.path().join("rootfs/X"), marker.as_bytes());
    b.chown();
    let out = b.run(&format!("magicnull-{who:?}"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(marker), "{}", describe(&out));
    assert!(!out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/1/cwd") && err.contains("ELOOP"), "{}", describe(&out));
    // No /dev tmpfs, and the image's /dev/null a symlink to a file of its own.
    let Some(b) = Bundle::new(who, &["cat", "/proc/keys"], |c| {
        c["mounts"].as_array_mut().unwrap().retain(|m| m["destination"] != "/dev");
        c["linux"]["maskedPaths"] = json!(["/proc/keys"]);
    }) else { return };
    std::fs::create_dir(b.path().join("rootfs/dev")).unwrap();
    std::os::unix::fs::symlink("/X", b.path().join("rootfs/dev/null")).unwrap();
    common::write_world_readable(&b.path().join("rootfs/X"), marker.as_bytes());
    b.chown();
    let out = b.run(&format!("symnull-{who:?}"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(marker), "{}", describe(&out));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not the null device"), "{}", describe(&out));
});

// A new network namespace is the container's own from the start: its sysfs (mounted inside
// it) lists only `lo`, brought up as runc and crun bring it up (its operstate is then
// "unknown": loopback has no carrier to report), and a createRuntime hook, which may set
// the network up, sees the namespace the program gets.
both!(fn a_new_network_namespace_is_the_containers_own(who) {
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    for with_hook in [false, true] {
        let Some(b) = Bundle::new(
            who,
            &["sh", "-c", "readlink /proc/self/ns/net; ls /sys/class/net; cat /sys/class/net/lo/operstate"],
            |c| {
                let ns = c["linux"]["namespaces"].as_array_mut().unwrap();
                if !ns.iter().any(|n| n["type"] == "network") {
                    ns.push(json!({"type": "network"}));
                }
                // The rootless spec binds the host's /sys: a sysfs of the container's own here.
                for m in c["mounts"].as_array_mut().unwrap() {
                    if m["destination"] == "/sys" {
                        *m = json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
                                    "options": ["nosuid", "noexec", "nodev", "ro"]});
                    }
                }
            },
        ) else { return };
        let seen = b.path().join("hook-saw");
        if with_hook {
            let mut cfg: Value = serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
            let script = format!(
                "p=$(/bin/sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'); /bin/readlink /proc/$p/ns/net > {}",
                seen.display()
            );
            cfg["hooks"] = json!({"createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", script]}]});
            std::fs::write(b.path().join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
            if who == Who::User {
                b.chown();
            }
        }
        let out = b.run(&format!("net{with_hook}"));
        assert!(out.status.success(), "hook {with_hook}: {}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "hook {with_hook}: {}", describe(&out));
        assert!(lines[0].starts_with("net:["), "hook {with_hook}: {}", describe(&out));
        assert_ne!(Path::new(lines[0]), host, "hook {with_hook}: the host's network namespace: {}", describe(&out));
        assert_eq!(&lines[1..], ["lo", "unknown"], "hook {with_hook}: {}", describe(&out));
        if with_hook {
            let saw = std::fs::read_to_string(&seen).unwrap_or_else(|e| panic!("the hook did not run: {e}: {}", describe(&out)));
            assert_eq!(saw.trim(), lines[0], "the createRuntime hook saw another namespace: {}", describe(&out));
        }
    }
});

// A user namespace joined by path owns the namespaces the container makes (as runc makes
// them: join first, then create), so the container's root may set its hostname and mount
// (Kubernetes' user-namespaced pods join the pod's user namespace this way). Made instead
// in the caller's user namespace, they refused both (EPERM).
both!(fn a_user_namespace_joined_by_path_owns_the_new_namespaces(who) {
    let Some(b) = Bundle::new(
        who,
        &["sh", "-c", "id -u; readlink /proc/self/ns/user; cat /proc/self/uid_map; hostname; touch /dev/shm/x && echo mounted; cat /proc/self/oom_score_adj"],
        |c| {
            c["hostname"] = json!("joined");
            // Set by the process that joins the namespace (the init inherits it): the
            // parent may no longer write the non-dumpable init's.
            c["process"]["oomScoreAdj"] = json!(100);
        },
    ) else { return };
    // The namespace to join: held by a process of `who`'s. Root maps an unprivileged range
    // (uid 0 inside is 100000 outside); the user maps itself to uid 0, as it may.
    let holder = Reaped(match who {
        Who::Root => Command::new("unshare").args(["--user", "sleep", "60"]).spawn().unwrap(),
        Who::User => {
            let u = test_user().unwrap();
            Command::new("setpriv")
                .args([format!("--reuid={}", u.uid), format!("--regid={}", u.gid), "--clear-groups".into()])
                .args(["unshare", "--user", "--map-root-user", "sleep", "60"])
                .spawn()
                .unwrap()
        }
    });
    let pid = holder.0.id();
    let ns = PathBuf::from(format!("/proc/{pid}/ns/user"));
    let mine = std::fs::read_link("/proc/self/ns/user").unwrap();
    let joined = wait_until("the user namespace holder did not start", || {
        let ready = std::fs::read_link(&ns).ok().filter(|l| *l != mine).filter(|_| {
            std::fs::read_to_string(format!("/proc/{pid}/uid_map")).is_ok_and(|m| !m.trim().is_empty())
        });
        if ready.is_none() && who == Who::Root && std::fs::read_link(&ns).is_ok_and(|l| l != mine) {
            for f in ["uid_map", "gid_map"] {
                let _ = std::fs::write(format!("/proc/{pid}/{f}"), "0 100000 65536\n");
            }
        }
        ready
    });
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let list = cfg["linux"]["namespaces"].as_array_mut().unwrap();
    list.retain(|n| n["type"] != "user");
    list.push(json!({"type": "user", "path": ns}));
    let linux = cfg["linux"].as_object_mut().unwrap();
    linux.remove("uidMappings");
    linux.remove("gidMappings");
    std::fs::write(b.path().join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    match who {
        Who::User => b.chown(),
        // The image belongs to the namespace's root, as a user-namespaced image does: its
        // mount points are made by that root.
        Who::Root => {
            let st = Command::new("chown").args(["-R", "100000:100000"]).arg(b.path().join("rootfs")).status().unwrap();
            assert!(st.success());
        }
    }
    let out = b.run("joinuser");
    drop(holder);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"0"), "not root in the joined namespace: {}", describe(&out));
    assert_eq!(lines.get(1).map(Path::new), Some(joined.as_path()), "{}", describe(&out));
    assert!(stdout.ends_with("joined\nmounted\n100\n"), "{}", describe(&out));
    // The caller's own user namespace (rootless podman may name its own): setns would refuse
    // it (EINVAL); nothing is joined and the namespaces are made in it.
    if who == Who::Root {
        let st = Command::new("chown").args(["-R", "0:0"]).arg(b.path().join("rootfs")).status().unwrap();
        assert!(st.success());
        let list = cfg["linux"]["namespaces"].as_array_mut().unwrap();
        list.retain(|n| n["type"] != "user");
        list.push(json!({"type": "user", "path": "/proc/self/ns/user"}));
        std::fs::write(b.path().join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
        let out = b.run("ownuser");
        assert!(out.status.success(), "{}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().nth(1).map(Path::new), Some(mine.as_path()), "{}", describe(&out));
        assert!(stdout.ends_with("joined\nmounted\n100\n"), "{}", describe(&out));
    }
});

/// The host's /sys, read-only, in place of the config's sysfs mount: sysfs needs a network
/// namespace of the container's own user namespace, and runc binds the host's then.
fn host_sys(c: &mut Value) {
    for m in c["mounts"].as_array_mut().unwrap() {
        if m["destination"] == "/sys" {
            *m = json!({"destination": "/sys", "type": "none", "source": "/sys",
                        "options": ["rbind", "nosuid", "noexec", "nodev", "ro"]});
        }
    }
}

/// The bundle's root filesystem owned by host uid/gid 100000 (root of the user namespaces
/// these tests map 0 → 100000).
fn chown_rootfs_to_100000(b: &Bundle) {
    let st = Command::new("chown")
        .args(["-R", "100000:100000"])
        .arg(b.path().join("rootfs"))
        .status()
        .unwrap();
    assert!(st.success());
}

/// A process holding a new network namespace of the host's user namespace: the holder (killed
/// on drop), the path of its namespace, and that namespace's link once it differs from ours.
fn network_namespace_holder() -> (Reaped, PathBuf, PathBuf) {
    let holder = Reaped(
        Command::new("unshare")
            .args(["--net", "sleep", "60"])
            .spawn()
            .unwrap(),
    );
    let ns = PathBuf::from(format!("/proc/{}/ns/net", holder.0.id()));
    let mine = std::fs::read_link("/proc/self/ns/net").unwrap();
    let joined = wait_until("the network namespace holder did not start", || {
        std::fs::read_link(&ns).ok().filter(|l| *l != mine)
    });
    (holder, ns, joined)
}

// A namespace given by path is joined before a new user namespace is made, as runc does:
// from inside the new one, cordon-oci would hold no capability over a network namespace
// of the host's user namespace (setns: EPERM). Root only: an unprivileged caller may not
// join a namespace from the host's user namespace at all.
#[test]
fn a_namespace_given_by_path_is_joined_before_a_new_user_namespace_is_made() {
    if !running_as_root() {
        skip!(
            "SKIP: a_namespace_given_by_path_is_joined_before_a_new_user_namespace_is_made: needs root"
        );
        return;
    }
    let Some(b) = Bundle::new(
        Who::Root,
        &["sh", "-c", "id -u; readlink /proc/self/ns/net; hostname"],
        |c| {
            c["hostname"] = json!("newuser");
            let list = c["linux"]["namespaces"].as_array_mut().unwrap();
            list.retain(|n| n["type"] != "network" && n["type"] != "user");
            list.push(json!({"type": "user"}));
            let map = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
            c["linux"]["uidMappings"] = map.clone();
            c["linux"]["gidMappings"] = map;
            host_sys(c);
        },
    ) else {
        return;
    };
    chown_rootfs_to_100000(&b);
    let (holder, ns, joined) = network_namespace_holder();
    let mut cfg: Value =
        serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    cfg["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "network", "path": ns}));
    std::fs::write(
        b.path().join("config.json"),
        serde_json::to_vec(&cfg).unwrap(),
    )
    .unwrap();
    let out = b.run("joinnet");
    drop(holder);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        ["0", joined.to_str().unwrap(), "newuser"],
        "{}",
        describe(&out)
    );
}

// Item 2 of the second OCI review: namespaces given by path were joined user namespace first,
// so a network namespace of the host's user namespace, given with a pod's user namespace,
// could no longer be joined (EPERM), by `create` or by `exec`. Now, as runc 1.2.1+, the
// others are joined first where the caller may, then the user namespace, then the rest.
// Root only: an unprivileged caller may not join a namespace of the host's user namespace.
#[test]
fn a_host_network_namespace_is_joined_with_a_user_namespace_given_by_path() {
    if !running_as_root() {
        skip!(
            "SKIP: a_host_network_namespace_is_joined_with_a_user_namespace_given_by_path: needs root"
        );
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "30"], |c| {
        host_sys(c);
    }) else {
        return;
    };
    chown_rootfs_to_100000(&b);
    let user = Reaped(
        Command::new("unshare")
            .args(["--user", "sleep", "60"])
            .spawn()
            .unwrap(),
    );
    let (net, net_ns, joined) = network_namespace_holder();
    let upid = user.0.id();
    let user_ns = PathBuf::from(format!("/proc/{upid}/ns/user"));
    let my_user = std::fs::read_link("/proc/self/ns/user").unwrap();
    wait_until("the user namespace holder did not start", || {
        if std::fs::read_link(&user_ns).ok()? == my_user {
            return None;
        }
        for f in ["uid_map", "gid_map"] {
            let _ = std::fs::write(format!("/proc/{upid}/{f}"), "0 100000 65536\n");
        }
        std::fs::read_to_string(format!("/proc/{upid}/uid_map"))
            .ok()
            .filter(|m| !m.trim().is_empty())
    });
    let mut cfg: Value =
        serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let list = cfg["linux"]["namespaces"].as_array_mut().unwrap();
    list.retain(|n| n["type"] != "user" && n["type"] != "network");
    list.push(json!({"type": "network", "path": net_ns}));
    list.push(json!({"type": "user", "path": user_ns}));
    let linux = cfg["linux"].as_object_mut().unwrap();
    linux.remove("uidMappings");
    linux.remove("gidMappings");
    std::fs::write(
        b.path().join("config.json"),
        serde_json::to_vec(&cfg).unwrap(),
    )
    .unwrap();
    let id = "joinhostnet";
    let _d = Deleted(&b, id.to_string());
    b.create(id);
    let out = b.oci(&["start", id]);
    assert!(out.status.success(), "start: {}", describe(&out));
    let out = b.oci(&[
        "exec",
        id,
        "sh",
        "-c",
        "id -u; readlink /proc/self/ns/net; readlink /proc/1/ns/net",
    ]);
    assert!(out.status.success(), "exec: {}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let j = joined.to_str().unwrap();
    assert_eq!(lines, ["0", j, j], "{}", describe(&out));
    drop((user, net));
}

// A pid namespace given by path, with another namespace given by path: the clone helper
// joins both, and the pid in the state (and the pid file) is the host's, not the one the
// joined namespace gives the process. The user joins namespaces it made itself (with the
// user namespace that owns them); root joins namespaces of the host's user namespace.
both!(fn a_pid_namespace_given_by_path_keeps_the_hosts_pid_in_the_state(who) {
    let Some(b) = Bundle::new(who, &["sleep", "30"], |_| {}) else { return };
    // pid 1 of a new pid namespace (and a network namespace) to join.
    let holder_args = ["--pid", "--fork", "--net", "--kill-child", "sleep", "60"];
    let holder = Reaped(match who {
        Who::Root => Command::new("unshare").args(holder_args).spawn().unwrap(),
        Who::User => {
            let u = test_user().unwrap();
            Command::new("setpriv")
                .args([format!("--reuid={}", u.uid), format!("--regid={}", u.gid), "--clear-groups".into()])
                .args(["unshare", "--user", "--map-root-user"])
                .args(holder_args)
                .spawn()
                .unwrap()
        }
    });
    let mine = std::fs::read_link("/proc/self/ns/pid").unwrap();
    // The holder's child (the sleep) is in the new pid namespace.
    let (sleeper, pid_ns) = wait_until("the pid namespace holder did not start", || {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", holder.0.id()))
            .unwrap_or_default();
        let c = children.split_whitespace().next()?.to_string();
        let ns = std::fs::read_link(format!("/proc/{c}/ns/pid")).ok()?;
        (ns != mine).then_some((c, ns))
    });
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let list = cfg["linux"]["namespaces"].as_array_mut().unwrap();
    list.retain(|n| !["pid", "network", "user"].contains(&n["type"].as_str().unwrap_or("")));
    list.push(json!({"type": "pid", "path": format!("/proc/{sleeper}/ns/pid")}));
    list.push(json!({"type": "network", "path": format!("/proc/{sleeper}/ns/net")}));
    if who == Who::User {
        list.push(json!({"type": "user", "path": format!("/proc/{sleeper}/ns/user")}));
        let linux = cfg["linux"].as_object_mut().unwrap();
        linux.remove("uidMappings");
        linux.remove("gidMappings");
    }
    std::fs::write(b.path().join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    if who == Who::User {
        b.chown();
    }
    let pid_file = b.path().join("pid");
    let mut a = b.bundle_args("create", "joinpid");
    a.insert(1, "--pid-file".into());
    a.insert(2, pid_file.display().to_string());
    let out = b.oci(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let check = || -> Result<(), String> {
        if !out.status.success() {
            return Err(format!("create: {}", describe(&out)));
        }
        let state = b.oci(&["state", "joinpid"]);
        let pid = serde_json::from_slice::<Value>(&state.stdout)
            .ok()
            .and_then(|v| v["pid"].as_i64())
            .ok_or_else(|| format!("state: {}", describe(&state)))?;
        let written = std::fs::read_to_string(&pid_file).map_err(|e| format!("pid file: {e}"))?;
        if written.trim() != pid.to_string() {
            return Err(format!("pid file {written:?}, state {pid}"));
        }
        // The host's pid: its /proc entry is the container's init, in the joined namespace.
        let ns = std::fs::read_link(format!("/proc/{pid}/ns/pid"))
            .map_err(|e| format!("/proc/{pid}: {e}"))?;
        if ns != pid_ns {
            return Err(format!("pid {pid} is in {ns:?}, not the joined {pid_ns:?}"));
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let nspid = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .unwrap_or_default()
            .to_string();
        if !nspid.starts_with(&format!("NSpid:\t{pid}\t")) {
            return Err(format!("pid {pid}: {nspid}"));
        }
        Ok(())
    };
    let result = check();
    let _ = b.oci(&["delete", "--force", "joinpid"]);
    drop(holder);
    if let Err(e) = result {
        panic!("{e}");
    }
});

both!(fn hooks_get_the_state(who) {
    let Some(b) = Bundle::new(who, &["true"], |_| {}) else { return };
    let out_dir = b.path().join("hooks");
    std::fs::create_dir(&out_dir).unwrap();
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let hook = |name: &str| json!({"path": "/bin/sh", "args": ["sh", "-c", format!("cat > {}/{name}", out_dir.display())]});
    cfg["hooks"] = json!({
        "prestart": [hook("prestart")],
        "createRuntime": [hook("createRuntime")],
        "poststart": [hook("poststart")],
        "poststop": [hook("poststop")]
    });
    std::fs::write(b.path().join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run("h1");
    assert!(out.status.success(), "{}", describe(&out));
    // The hooks of create run after the runtime environment is made (the runtime spec's
    // lifecycle step 2): `created`, as crun passes and runtime-tools' hooks_stdin requires
    // (runc passes `creating`). Then `running` and `stopped`. (createContainer and
    // startContainer, which run in the container: hooks_in_the_container_get_the_state.)
    let hooks = [("prestart", "created"), ("createRuntime", "created"), ("poststart", "running"), ("poststop", "stopped")];
    for (name, status) in hooks {
        let text = std::fs::read_to_string(out_dir.join(name)).unwrap_or_else(|e| panic!("{name} hook did not run: {e}"));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], "h1", "{name}: {v}");
        assert_eq!(v["status"], status, "{name}: {v}");
        assert_eq!(v["bundle"], b.path().display().to_string(), "{name}: {v}");
    }
});

// The hooks that run in the container see the state too: createContainer (before
// pivot_root, where the runtime's paths still resolve) and startContainer (after `start`),
// both `created`.
both!(fn hooks_in_the_container_get_the_state(who) {
    let Some(b) = Bundle::new(who, &["cat", "/tmp/startContainer"], |c| {
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["mode=1777"]}),
        );
    }) else { return };
    let out_dir = b.path().join("hooks");
    std::fs::create_dir(&out_dir).unwrap();
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let sh = |cmd: String| json!({"path": "/bin/sh", "args": ["sh", "-c", cmd]});
    cfg["hooks"] = json!({
        "createContainer": [sh(format!("cat > {}/createContainer", out_dir.display()))],
        "startContainer": [sh("cat > /tmp/startContainer".into())]
    });
    std::fs::write(b.path().join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run("h2");
    assert!(out.status.success(), "{}", describe(&out));
    let create = std::fs::read_to_string(out_dir.join("createContainer"))
        .unwrap_or_else(|e| panic!("createContainer hook did not run: {e}: {}", describe(&out)));
    for (name, text) in [
        ("createContainer", create),
        ("startContainer", String::from_utf8_lossy(&out.stdout).into_owned()),
    ] {
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text:?}"));
        assert_eq!(v["id"], "h2", "{name}: {v}");
        assert_eq!(v["status"], "created", "{name}: {v}");
        assert_eq!(v["bundle"], b.path().display().to_string(), "{name}: {v}");
        assert!(v["pid"].as_u64().is_some_and(|p| p > 0), "{name}: {v}");
    }
});

// Rootless podman on a systemd host (its default cgroup manager there) runs the runtime with
// --systemd-cgroup and a cgroupsPath `user.slice:libpod:ID`, from conmon's cgroup, which is
// not delegated. cordon-oci computed the unit's path from the hierarchy's root, could not
// create it, and failed create for the limits. It now asks the caller's systemd user
// manager for that unit, a transient scope delegated to the caller, as runc and crun do:
// the container's cgroup is the scope's `container` leaf, with the config's limits (systemd
// sets the scope's own limit files from unit properties), and systemd removes the scope once
// the container is deleted. Runs in scripts/vm-test's guest, which has a user manager.
#[test]
fn rootless_systemd_cgroup_gets_a_scope_from_the_user_manager() {
    let test = "rootless_systemd_cgroup_gets_a_scope_from_the_user_manager";
    let who = Who::User;
    let Some((runtime, manager, session)) = user_manager_on_v2(test) else {
        return;
    };
    let id = "sd1";
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["linux"]["cgroupsPath"] = json!(format!("user.slice:libpod:{id}"));
        c["linux"]["resources"] = json!({"memory": {"limit": 67108864}, "pids": {"limit": 50}});
    }) else {
        return;
    };
    let env = [
        ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
        ("DBUS_SESSION_BUS_ADDRESS", ""),
    ];
    let oci = |args: &[&str]| b.oci_in_session(&session, &env, args);
    let bundle = b.path().display().to_string();
    let _d = Deleted(&b, id.to_string());
    let out = oci(&["--systemd-cgroup", "create", "--bundle", &bundle, id]);
    assert!(out.status.success(), "create: {}", describe(&out));
    let pid = b.state(id)["pid"].as_i64().unwrap();
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap()
        .trim()
        .to_string();
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    assert!(
        dir.starts_with(&manager)
            && rel.ends_with(&format!("/user.slice/libpod-{id}.scope/container")),
        "the container's cgroup {rel} is not the container leaf of libpod-{id}.scope in the user manager's tree {}",
        manager.display()
    );
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert_eq!(read("memory.max"), "67108864", "{}", dir.display());
    assert_eq!(read("pids.max"), "50", "{}", dir.display());
    // What `features` says of it.
    assert_features_cgroup(&b, "systemdUser");
    let scope = dir.parent().unwrap().to_path_buf();
    // create has returned: nothing is left in cordon-oci's own leaf.
    let runtime_leaf = std::fs::read_to_string(scope.join("cordon-oci/cgroup.procs")).unwrap();
    assert_eq!(
        runtime_leaf.trim(),
        "",
        "cordon-oci's leaf of {}",
        scope.display()
    );
    let out = oci(&["--systemd-cgroup", "start", id]);
    assert!(out.status.success(), "start: {}", describe(&out));
    assert_eq!(b.state(id)["status"], "running");
    // exec from the session (in the manager's tree): into the container's cgroup, which it
    // sees as its root (cgroup namespace) or by its full path.
    let out = oci(&["exec", id, "cat", "/proc/self/cgroup"]);
    let seen = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && (seen == "0::/" || seen == format!("0::{rel}")),
        "exec: {}",
        describe(&out)
    );
    // exec from a cgroup outside the manager's tree, not the user's: it cannot move itself
    // into the container's, and says where to start it instead.
    let outside =
        Path::new("/sys/fs/cgroup").join(format!("cordon-outside-{}", std::process::id()));
    std::fs::create_dir(&outside).unwrap();
    let out = b.oci_in_session(&outside, &env, &["exec", id, "true"]);
    let _ = std::fs::remove_dir(&outside);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("join the container's cgroup")
            && err.contains("systemd-run --user --scope"),
        "exec from outside: {}",
        describe(&out)
    );
    let out = oci(&["--systemd-cgroup", "delete", "--force", id]);
    assert_deleted_with_its_scope(&out);
    // Created again at once, as `podman restart` does: the scope of the same name may still
    // be going away, and create waits for it.
    let out = oci(&["--systemd-cgroup", "create", "--bundle", &bundle, id]);
    assert!(out.status.success(), "create again: {}", describe(&out));
    let out = oci(&["--systemd-cgroup", "delete", "--force", id]);
    assert_deleted_with_its_scope(&out);
    assert_gone_soon(&scope);

    // A foreground run from the session: cordon-oci waits in the scope's own leaf and
    // deletes the container from there without stopping the scope it is in; run's exit is
    // the container's, nothing is warned of, and the scope goes once run has exited.
    let id = "sd2";
    let _d = Deleted(&b, id.to_string());
    let cfg_path = b.path().join("config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["linux"]["cgroupsPath"] = json!(format!("user.slice:libpod:{id}"));
    cfg["process"]["args"] = json!(["sh", "-c", "exit 7"]);
    std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let out = oci(&["--systemd-cgroup", "run", "--bundle", &bundle, id]);
    assert!(
        out.status.code() == Some(7) && !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "run: {}",
        describe(&out)
    );
    assert_gone_soon(&scope.with_file_name(format!("libpod-{id}.scope")));
}

/// `cordon-oci features` says `linux.cgroup.FIELD` is true: for the tests that have just seen
/// `--systemd-cgroup` get a scope (FIELD `systemd` from the system manager, `systemdUser`
/// from a user manager), so that `features` cannot say otherwise of what cordon-oci does.
fn assert_features_cgroup(b: &Bundle, field: &str) {
    let out = b.oci(&["features"]);
    assert!(out.status.success(), "features: {}", describe(&out));
    let f: Value = serde_json::from_slice(&out.stdout).expect("features prints JSON");
    assert_eq!(
        f["linux"]["cgroup"][field],
        json!(true),
        "features: linux.cgroup.{field}: {}",
        describe(&out)
    );
}

// Root on a host booted with systemd: `--systemd-cgroup` asks the system manager for the
// container's scope (machine.slice:cordon:ID), as runc and crun do, instead of making the
// cgroup behind systemd's back in a slice it manages. scripts/vm-test's guest has no system
// manager (its PID 1 is a script); root's own systemd user manager, on its session bus,
// stands in for it through DBUS_SYSTEM_BUS_ADDRESS, the address a system bus client takes:
// the calls and the scope are the same, the manager is not PID 1. With no system bus to
// reach, root makes the cgroup itself, at the cgroupsPath's place, and says so; a manager
// that answers without a scope fails create.
#[test]
fn root_systemd_cgroup_gets_a_scope_from_the_system_manager() {
    let test = "root_systemd_cgroup_gets_a_scope_from_the_system_manager";
    if !running_as_root() || cgroup_layout() != CgroupLayout::PureV2 {
        skip!(
            "SKIP: {test}: needs root on a pure cgroup v2 host with a systemd manager (scripts/vm-test's guest)"
        );
        return;
    }
    let required = std::env::var("CORDON_TEST_REQUIRE_USER_MANAGER").as_deref() == Ok("1");
    let v = std::env::var("CORDON_TEST_SYSTEM_MANAGER").unwrap_or_default();
    let Some((bus, manager)) = v.rsplit_once(':').filter(|_| !v.is_empty()) else {
        assert!(
            !required,
            "{test}: CORDON_TEST_REQUIRE_USER_MANAGER=1 without CORDON_TEST_SYSTEM_MANAGER"
        );
        skip!(
            "SKIP: {test}: no systemd manager for root (CORDON_TEST_SYSTEM_MANAGER; scripts/vm-test starts one)"
        );
        return;
    };
    let manager = PathBuf::from(manager);
    assert!(
        Path::new("/run/systemd/system").is_dir(),
        "{test}: the host must look booted with systemd (/run/systemd/system)"
    );
    let id = "sdroot1";
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
        c["linux"]["cgroupsPath"] = json!(format!("machine.slice:cordon:{id}"));
        c["linux"]["resources"] = json!({"memory": {"limit": 67108864}, "pids": {"limit": 50}});
    }) else {
        return;
    };
    let oci = |bus: &str, args: &[&str]| {
        b.output_of(
            || {
                let mut cmd = b.command(args);
                cmd.env("DBUS_SYSTEM_BUS_ADDRESS", bus);
                cmd
            },
            args,
        )
    };
    let bundle = b.path().display().to_string();
    let _d = Deleted(&b, id.to_string());
    let out = oci(
        bus,
        &["--systemd-cgroup", "create", "--bundle", &bundle, id],
    );
    assert!(
        out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "create: {}",
        describe(&out)
    );
    let pid = b.state(id)["pid"].as_i64().unwrap();
    let dir = v2_cgroup_of(pid);
    assert!(
        dir.starts_with(&manager)
            && dir.ends_with(format!("machine.slice/cordon-{id}.scope/container")),
        "the container's cgroup {} is not the container leaf of cordon-{id}.scope in the manager's tree {}",
        dir.display(),
        manager.display()
    );
    assert_eq!(read_trim(&dir.join("memory.max")), "67108864");
    assert_eq!(read_trim(&dir.join("pids.max")), "50");
    // What `features` says of it.
    assert_features_cgroup(&b, "systemd");
    let scope = dir.parent().unwrap().to_path_buf();
    assert_eq!(
        read_trim(&scope.join("cordon-oci/cgroup.procs")),
        "",
        "cordon-oci's leaf of {}",
        scope.display()
    );
    // A manager that answers but gives no scope (the unit is the running container's) is
    // not fallen back from: that cgroup is systemd's unit's, and create fails, saying so.
    let out = oci(
        bus,
        &[
            "--systemd-cgroup",
            "create",
            "--bundle",
            &bundle,
            "sdroot1b",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        // systemd: "Unit ... was already loaded or has a fragment file."
        !out.status.success()
            && err.contains("gave no scope")
            && err.contains("cordon-sdroot1.scope"),
        "a second container for the same unit: {}",
        describe(&out)
    );
    let _ = oci(bus, &["delete", "--force", "sdroot1b"]);
    let out = oci(bus, &["--systemd-cgroup", "delete", "--force", id]);
    assert_deleted_with_its_scope(&out);
    assert_gone_soon(&scope);

    // No system bus: the cgroup made directly at machine.slice/cordon-ID.scope, with a warning.
    let id = "sdroot2";
    let _d = Deleted(&b, id.to_string());
    let cfg_path = b.path().join("config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["linux"]["cgroupsPath"] = json!(format!("machine.slice:cordon:{id}"));
    std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let nobus = "unix:path=/nonexistent/cordon-test-bus";
    let out = oci(
        nobus,
        &["--systemd-cgroup", "create", "--bundle", &bundle, id],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("no scope from the systemd system manager"),
        "create without a bus: {}",
        describe(&out)
    );
    let pid = b.state(id)["pid"].as_i64().unwrap();
    let dir = v2_cgroup_of(pid);
    assert_eq!(
        dir,
        Path::new("/sys/fs/cgroup/machine.slice").join(format!("cordon-{id}.scope"))
    );
    assert_eq!(read_trim(&dir.join("memory.max")), "67108864");
    let out = oci(nobus, &["--systemd-cgroup", "delete", "--force", id]);
    assert!(out.status.success(), "delete: {}", describe(&out));
    assert!(!dir.exists(), "{} outlived delete", dir.display());

    // A foreground run: cordon-oci waits in the scope's leaf and deletes the container from
    // there, without stopping the scope it is in (StopUnit would SIGTERM it); the scope goes
    // once run has exited, and run's exit is the container's.
    let id = "sdroot3";
    let _d = Deleted(&b, id.to_string());
    cfg["linux"]["cgroupsPath"] = json!(format!("machine.slice:cordon:{id}"));
    cfg["process"]["args"] = json!(["sh", "-c", "exit 7"]);
    std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let out = oci(bus, &["--systemd-cgroup", "run", "--bundle", &bundle, id]);
    assert!(
        out.status.code() == Some(7) && !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "run: {}",
        describe(&out)
    );
    assert_gone_soon(&manager.join(format!("machine.slice/cordon-{id}.scope")));
}

// The same through podman itself: rootless, with the systemd cgroup manager (podman's
// default on a systemd host), started from a login session's cgroup. podman puts conmon in
// a scope of the user manager and runs cordon-oci with --systemd-cgroup; `--memory` must
// reach the container's cgroup, which the container sees as its root (cgroup namespace).
#[test]
fn rootless_podman_with_the_systemd_cgroup_manager() {
    let test = "rootless_podman_with_the_systemd_cgroup_manager";
    let who = Who::User;
    if let Ok(why) = std::env::var("CORDON_TEST_NO_PODMAN") {
        skip!("SKIP: {test}: {why} (CORDON_TEST_NO_PODMAN)");
        return;
    }
    if Command::new("podman").arg("--version").output().is_err() {
        skip_unless_required!("SKIP: {test}: podman not installed (apt-get install podman)");
        return;
    }
    let Some((runtime, _manager, session)) = user_manager_on_v2(test) else {
        return;
    };
    let Some(b) = Bundle::new(who, &["true"], |_| {}) else {
        return;
    };
    let tar = rootfs_tar(&b);
    let home = b.path().join("podman-home");
    std::fs::create_dir_all(&home).unwrap();
    b.chown();
    let (home_env, runtime_env) = (
        format!("{}", home.display()),
        format!("{}", runtime.display()),
    );
    let bus = format!("unix:path={runtime_env}/bus");
    let env = [
        ("HOME", home_env.as_str()),
        ("XDG_RUNTIME_DIR", runtime_env.as_str()),
        ("DBUS_SESSION_BUS_ADDRESS", bus.as_str()),
    ];
    let podman = |args: &[&str]| -> Output {
        let mut c = user_in_cgroup(&session, &env);
        c.args(["podman", "--cgroup-manager=systemd"]).args(args);
        c.output().unwrap()
    };
    let image = "localhost/cordon-oci-sd-test:latest";
    let out = podman(&["import", "-q", tar.to_str().unwrap(), image]);
    assert!(out.status.success(), "podman import: {}", describe(&out));
    let rt = oci_bin().to_str().unwrap().to_string();
    let probe = "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max; exit 7";
    let out = podman(&[
        "--runtime",
        &rt,
        "run",
        "--rm",
        "--network",
        "none",
        "--memory",
        "64m",
        "--pids-limit",
        "40",
        image,
        "sh",
        "-c",
        probe,
    ]);
    assert_eq!(out.status.code(), Some(7), "podman run: {}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "67108864\n40\n",
        "{}",
        describe(&out)
    );
    let _ = podman(&["rmi", "-f", image]);
}

/// Whether a container `who` creates gets a cgroup with controllers here: always as root; for
/// the unprivileged user only on cgroup v2 where each cordon-oci starts in a delegated cgroup
/// (scripts/vm-test's guest). Prints the SKIP line otherwise.
fn gets_a_cgroup(who: Who, test: &str) -> bool {
    if who == Who::Root {
        return true;
    }
    if cgroup_layout() != CgroupLayout::PureV2 {
        skip!(
            "SKIP: {test} as user: rootless containers get no cgroup on this host (cgroup v1 controllers cannot be delegated)"
        );
        return false;
    }
    if cgroup_scopes().is_none() || !running_as_root() {
        skip!(
            "SKIP: {test} as user: no delegated cgroup to start cordon-oci in (set CORDON_TEST_CGROUP_SCOPES, as scripts/vm-test does)"
        );
        return false;
    }
    true
}

both!(fn resources_are_applied(who) {
    if !gets_a_cgroup(who, "resources_are_applied") {
        return;
    }
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["linux"]["resources"] = json!({"memory": {"limit": 67108864}, "pids": {"limit": 17}});
    }) else { return };
    let pid = b.create("res1");
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let (mem, pids) = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let p = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        let d = format!("/sys/fs/cgroup{p}");
        (format!("{d}/memory.max"), format!("{d}/pids.max"))
    } else {
        let path_of = |ctrl: &str| cg.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, p) = (f.next()?, f.next()?, f.next()?);
            c.split(',').any(|x| x == ctrl).then(|| p.to_string())
        }).unwrap();
        (
            format!("/sys/fs/cgroup/memory{}/memory.limit_in_bytes", path_of("memory")),
            format!("/sys/fs/cgroup/pids{}/pids.max", path_of("pids")),
        )
    };
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    assert_eq!(read(&mem).trim(), "67108864");
    assert_eq!(read(&pids).trim(), "17");
    // Started: a rootless caller cannot exec into a container whose init is still cordon-oci
    // (non-dumpable until its execve).
    let out = b.oci(&["start", "res1"]);
    assert!(out.status.success(), "start: {}", describe(&out));
    // A process started by `exec` joins the same cgroups (it moves itself in, like init).
    let out = b.oci(&["exec", "res1", "cat", "/proc/self/cgroup"]);
    assert!(out.status.success(), "exec: {}", describe(&out));
    let host_view = |text: &str| -> Vec<String> {
        text.lines().filter(|l| l.contains(":memory:") || l.contains(":pids:") || l.starts_with("0::")).map(String::from).collect()
    };
    let exec_pid_cg = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!host_view(&exec_pid_cg).is_empty(), "{exec_pid_cg}");
    // Seen from inside, through the container's cgroup namespace when it has one: compare
    // with init's view from inside too.
    let out = b.oci(&["exec", "res1", "cat", "/proc/1/cgroup"]);
    assert!(out.status.success(), "exec: {}", describe(&out));
    assert_eq!(host_view(&exec_pid_cg), host_view(&String::from_utf8_lossy(&out.stdout)));
    let out = b.oci(&["delete", "--force", "res1"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!Path::new(&mem).exists(), "the cgroup outlived delete");
});

// A container whose cgroup is delegated to it can make sub-cgroups and move processes there,
// out of its own cgroup.procs: `ps` lists them, `kill --all` reaches them and `delete` removes
// the sub-cgroups with the container's (it failed with EBUSY, and kill --all missed them).
// The test plays the container's part from outside: it moves a process of its own into a
// sub-cgroup of the container's pids cgroup (v1) or of its one cgroup (v2).
both!(fn kill_all_and_delete_reach_the_containers_sub_cgroups(who) {
    if !gets_a_cgroup(who, "kill_all_and_delete_reach_the_containers_sub_cgroups") {
        return;
    }
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    let id = format!("subcg-{who:?}");
    let _d = Deleted(&b, id.clone());
    let pid = b.create(&id);
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let dir = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        PathBuf::from(format!("/sys/fs/cgroup{}", own.lines().find_map(|l| l.strip_prefix("0::")).unwrap()))
    } else {
        let rel = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, p) = (f.next()?, f.next()?, f.next()?);
            (c == "pids").then(|| p.to_string())
        }).unwrap();
        PathBuf::from(format!("/sys/fs/cgroup/pids{rel}"))
    };
    let sub = dir.join("sub").join("deeper");
    std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{}: {e}", sub.display()));
    let mut moved = std::process::Command::new("sleep").arg("61").spawn().unwrap();
    let _k = KilledOnDrop(nix::unistd::Pid::from_raw(moved.id() as i32));
    std::fs::write(sub.join("cgroup.procs"), moved.id().to_string()).unwrap();
    let out = b.oci(&["ps", "--format", "json", &id]);
    assert!(out.status.success(), "ps: {}", describe(&out));
    let listed: Vec<i64> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(listed.contains(&pid) && listed.contains(&(moved.id() as i64)), "ps: {listed:?}");
    let out = b.oci(&["kill", "--all", &id, "KILL"]);
    assert!(out.status.success(), "kill --all: {}", describe(&out));
    let status = moved.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "the process in the sub-cgroup"
    );
    b.wait_status(&id, "stopped");
    let out = b.oci(&["delete", &id]);
    assert!(out.status.success(), "delete: {}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).is_empty(), "delete warned: {}", describe(&out));
    assert!(!dir.exists(), "delete left the container's cgroup {}", dir.display());
});

/// podman as `who` (rootless: its storage and runtime state under `home`), run with `args`.
fn podman_as(who: Who, home: &Path, args: &[&str]) -> Output {
    let mut c = match who {
        Who::User if running_as_root() => {
            let u = test_user().unwrap();
            let mut c = Command::new("setpriv");
            c.args([
                format!("--reuid={}", u.uid),
                format!("--regid={}", u.gid),
                "--clear-groups".into(),
                "--".into(),
                "podman".into(),
            ]);
            c.env("HOME", home).env("XDG_RUNTIME_DIR", home.join("run"));
            c
        }
        _ => Command::new("podman"),
    };
    c.args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A busybox bundle imported into podman as `image` for `who`, and the podman home (rootless
/// podman keeps its storage and runtime state under the user's own directories); None after
/// a SKIP when podman is not there.
fn podman_image(who: Who, test: &str, image: &str) -> Option<(Bundle, PathBuf)> {
    if let Ok(why) = std::env::var("CORDON_TEST_NO_PODMAN") {
        skip!("SKIP: {test}: {why} (CORDON_TEST_NO_PODMAN)");
        return None;
    }
    if Command::new("podman").arg("--version").output().is_err() {
        skip_unless_required!("SKIP: {test}: podman not installed (apt-get install podman)");
        return None;
    }
    let b = Bundle::new(who, &["true"], |_| {})?;
    let tar = rootfs_tar(&b);
    let home = b.path().join("podman-home");
    std::fs::create_dir_all(home.join("run")).unwrap();
    b.chown();
    let out = podman_as(who, &home, &["import", "-q", tar.to_str().unwrap(), image]);
    assert!(out.status.success(), "podman import: {}", describe(&out));
    Some((b, home))
}

// cordon itself inside a podman container (cordon-oci the runtime), as root and rootless: with
// the three fixes the README gives (`--security-opt seccomp=unconfined`, `--security-opt
// unmask=ALL`, a /tmp) a sandbox runs there with its isolation whole; without each, cordon
// fails and its message names the flag that lifts it.
both!(fn cordon_runs_inside_a_podman_container(who) {
    let image = "localhost/cordon-in-podman-test:latest";
    let Some((_b, home)) = podman_image(who, "cordon_runs_inside_a_podman_container", image) else {
        return;
    };
    let rt = oci_bin().to_str().unwrap().to_string();
    let bin_dir = common::cordon_bin().parent().unwrap().to_str().unwrap().to_string();
    let volume = format!("{bin_dir}:/cordon:ro");
    let run = |fixes: &[&str]| {
        let mut a: Vec<&str> = vec!["--runtime", &rt, "run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "-v", &volume];
        a.extend_from_slice(fixes);
        a.extend([image, "/cordon/cordon", "exec", "--", "cat", "/proc/self/status"]);
        podman_as(who, &home, &a)
    };
    let (seccomp, unmask, tmp) = (["--security-opt", "seccomp=unconfined"], ["--security-opt", "unmask=ALL"], ["--tmpfs", "/tmp"]);
    let out = run(&[&seccomp[..], &unmask, &tmp].concat());
    assert!(out.status.success(), "{}", describe(&out));
    let status = String::from_utf8_lossy(&out.stdout);
    for line in ["NoNewPrivs:\t1", "CapEff:\t0000000000000000", "Seccomp:\t2", "Uid:\t1000\t"] {
        assert!(status.contains(line), "{line}: {}", describe(&out));
    }
    for (fixes, named) in [
        ([&unmask[..], &tmp].concat(), "seccomp=unconfined"),
        ([&seccomp[..], &tmp].concat(), "unmask=ALL"),
        ([&seccomp[..], &unmask].concat(), "--tmpfs /tmp"),
    ] {
        let out = run(&fixes);
        assert_eq!(out.status.code(), Some(125), "{named}: {}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(named), "{named}: {}", describe(&out));
    }
    let _ = podman_as(who, &home, &["rmi", "-f", image]);
});

// podman with cordon-oci as its runtime, as root and rootless: an imported busybox image runs
// (output, exit code), a read-only root refuses writes, a detached container takes an exec and
// is stopped and removed, and (root: rootless podman ignores resource limits on cgroup v1) a
// --memory limit reaches the container's memory cgroup.
both!(fn podman_runs_containers(who) {
    let image = "localhost/cordon-oci-test:latest";
    let Some((_b, home)) = podman_image(who, "podman_runs_containers", image) else {
        return;
    };
    let podman = |args: &[&str]| podman_as(who, &home, args);
    let rt = oci_bin().to_str().unwrap().to_string();
    // Rootless: this host gives the user no /dev/net/tun, so no slirp network.
    let mut base: Vec<&str> = vec!["--runtime", &rt, "run", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"];
    if who == Who::User {
        base.extend(["--network", "none"]);
    }
    let run = |extra: &[&str], cmd: &[&str]| {
        let mut a = base.clone();
        a.push("--rm");
        a.extend_from_slice(extra);
        a.push(image);
        a.extend_from_slice(cmd);
        podman(&a)
    };
    let out = run(&[], &["echo", "hi"]);
    assert!(out.status.success(), "podman run: {}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    let out = run(&[], &["sh", "-c", "exit 5"]);
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let out = run(&["--read-only"], &["touch", "/x"]);
    assert!(!out.status.success(), "--read-only root was writable: {}", describe(&out));
    // Root podman on a host with AppArmor on (and profiles loadable) gives the container its
    // default profile, which the container runs under.
    let apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y")
        && Path::new("/sys/kernel/security/apparmor").exists()
        && Path::new("/usr/sbin/apparmor_parser").exists();
    if who == Who::Root && apparmor {
        let out = run(&[], &["cat", "/proc/self/attr/current"]);
        let label = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && label.starts_with("containers-default") && label.contains("(enforce)"),
            "{}",
            describe(&out)
        );
    }
    if who == Who::Root {
        // The container's own memory cgroup is at the hierarchy's mount point (as with runc;
        // the host's tree is not visible: review F1).
        let probe = "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max";
        let out = run(&["--memory", "64m"], &["sh", "-c", probe]);
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "67108864", "{}", describe(&out));
        // A read throttle on the disk under the host's root (/dev/DEVNAME, from sysfs).
        let disk = disk_of(Path::new("/")).and_then(|(ma, mi)| {
            let uevent = std::fs::read_to_string(format!("/sys/dev/block/{ma}:{mi}/uevent")).ok()?;
            let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?.to_string();
            Some((ma, mi, name))
        });
        match disk {
            Some((ma, mi, name)) => {
                let probe = "cat /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device 2>/dev/null || cat /sys/fs/cgroup/io.max";
                let out = run(&["--device-read-bps", &format!("/dev/{name}:1mb")], &["sh", "-c", probe]);
                assert!(out.status.success(), "{}", describe(&out));
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    text.lines().any(|l| l == format!("{ma}:{mi} 1048576") || l.starts_with(&format!("{ma}:{mi} rbps=1048576 "))),
                    "{}",
                    describe(&out)
                );
            }
            None => eprintln!("SKIP: podman --device-read-bps: / is on no block device"),
        }
    }
    // Detached: exec into it, stop it, remove it.
    let name = format!("cordon-oci-test-{who:?}-{}", std::process::id()).to_lowercase();
    let mut a = base.clone();
    a.extend(["-d", "--name", &name, image, "sleep", "60"]);
    let out = podman(&a);
    assert!(out.status.success(), "podman run -d: {}", describe(&out));
    let out = podman(&["--runtime", &rt, "exec", &name, "sh", "-c", "echo exec-ok; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "exec-ok\n", "{}", describe(&out));
    let out = podman(&["--runtime", &rt, "stop", "-t", "1", &name]);
    assert!(out.status.success(), "podman stop: {}", describe(&out));
    let out = podman(&["--runtime", &rt, "rm", &name]);
    assert!(out.status.success(), "podman rm: {}", describe(&out));
    let out = podman(&["ps", "-a", "--format", "{{.Names}}"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&name), "{}", describe(&out));
});

both!(fn exec_joins_the_container(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["hostname"] = json!("exec-test");
    }) else { return };
    let id = format!("e1-{who:?}");
    let _d = Deleted(&b, id.clone());
    b.create(&id);
    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = b.oci(&["exec", &id, "sh", "-c", "hostname; echo $$; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("exec-test"), "exec is not in the uts namespace: {}", describe(&out));
    // In the container's pid namespace the exec'd shell is not pid 1 (that is `sleep`).
    let pid: u32 = lines.next().unwrap().parse().unwrap();
    assert!(pid > 1, "{}", describe(&out));
    // A process that cannot start fails exec itself, as runc's does (containerd and CRI
    // tell a failed exec from a process that failed; --detach must not report success),
    // with 127 or 126 and runc's words, which podman maps to those codes.
    for (args, code, words) in [
        (&["nosuch"][..], 127, "executable file not found in $PATH"),
        (&["--detach", "nosuch"][..], 127, "executable file not found in $PATH"),
        (&["/bin"][..], 126, "EACCES"),
        (&["--cwd", "/nonexistent", "true"][..], 1, "cannot start the exec process: enter process.cwd: /nonexistent"),
    ] {
        let mut a = vec!["exec"];
        a.extend(&args[..args.len() - 1]);
        a.extend([id.as_str(), args[args.len() - 1]]);
        let out = b.oci(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code() == Some(code) && err.contains(words), "{a:?}: {}", describe(&out));
    }
    assert_eq!(b.state(&id)["status"], "running", "a failed exec touched the container");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// An exec process killed before its program runs, without a word (here by the container's
// seccomp filter, which kills setresuid to uid 1234 and, without noNewPrivileges, is in
// place before the process takes its identity), fails exec; it counted as started (exec
// returned 159, `--detach` 0). The control run as uid 0 shows the filter lets the rest run.
both!(fn exec_of_a_process_killed_before_its_program_fails(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["process"]["noNewPrivileges"] = json!(false);
        c["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["setresuid"], "action": "SCMP_ACT_KILL_PROCESS",
                "args": [{"index": 0, "value": 1234, "op": "SCMP_CMP_EQ"}]},
                // Refuses the exec process's 6-byte mark ("READY "), which it writes under
                // this filter: a process that then runs its program and exits with a status
                // has run, and exec gives that status (the control run below).
                {"names": ["write"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                "args": [{"index": 2, "value": 6, "op": "SCMP_CMP_EQ"}]}]
        });
    }) else { return };
    let id = format!("ek-{who:?}");
    let _d = Deleted(&b, id.clone());
    b.create(&id);
    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = b.oci(&["exec", "--user", "0:0", &id, "sh", "-c", "exit 4"]);
    assert_eq!(out.status.code(), Some(4), "control run, its mark refused: {}", describe(&out));
    for detach in [false, true] {
        let mut a = vec!["exec", "--user", "1234:0"];
        if detach {
            a.push("--detach");
        }
        a.extend([id.as_str(), "true"]);
        let out = b.oci(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && err.contains("killed by SIGSYS before its program ran"),
            "{a:?}: {}",
            describe(&out)
        );
    }
    assert_eq!(b.state(&id)["status"], "running", "a failed exec touched the container");
});

// Item 9 of the second OCI review: `exec --user 1000` set gid 0, where runc keeps the
// config's gid when only a uid is given. Root only: the user's container maps uid 0 alone.
#[test]
fn exec_user_with_a_uid_alone_keeps_the_configs_gid() {
    if !running_as_root() {
        skip!("SKIP: exec_user_with_a_uid_alone_keeps_the_configs_gid: needs root");
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "30"], |c| {
        c["process"]["user"] = json!({"uid": 0, "gid": 1000});
    }) else {
        return;
    };
    let id = "execuser";
    let _d = Deleted(&b, id.to_string());
    let a = b.bundle_args("run", id);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--detach");
    let out = b.oci(&a);
    assert!(out.status.success(), "{}", describe(&out));
    for (user, want) in [("1001", "1001 1000"), ("1001:5", "1001 5")] {
        let out = b.oci(&[
            "exec",
            "--user",
            user,
            id,
            "sh",
            "-c",
            "echo $(id -u) $(id -g)",
        ]);
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "--user {user}: {}",
            describe(&out)
        );
    }
}

fn environ(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect()
}

// The process gets the config's environment and nothing else but HOME when the config has
// none (as runc and crun: the user's home in the container's /etc/passwd, else `/`); a key
// given twice keeps its first place with its last value, as runc sets it, and `exec --env`
// overrides the config.
both!(fn environment_is_the_configs_with_later_settings_winning(who) {
    let env = json!(["PATH=/bin", "A=1", "B=x=y", "A=2", "E="]);
    let Some(b) = Bundle::new(who, &["cat", "/proc/self/environ"], |c| {
        c["process"]["env"] = env.clone();
    }) else { return };
    let out = b.run(&format!("env1-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(environ(&out), ["PATH=/bin", "A=2", "B=x=y", "E=", "HOME=/"], "{}", describe(&out));
    // The process's uid has a passwd entry: its home; a HOME of the config's is kept.
    for (home, want) in [(None, "HOME=/srv/app"), (Some("HOME=/mine"), "HOME=/mine")] {
        let Some(b) = Bundle::new(who, &["cat", "/proc/self/environ"], |c| {
            let mut e = vec![json!("PATH=/bin")];
            e.extend(home.map(|h| json!(h)));
            c["process"]["env"] = json!(e);
        }) else { return };
        std::fs::create_dir_all(b.path().join("rootfs/etc")).unwrap();
        std::fs::write(b.path().join("rootfs/etc/passwd"), "root:x:0:0:root:/srv/app:/bin/sh\n").unwrap();
        if who == Who::User {
            b.chown();
        }
        let out = b.run(&format!("envh-{who:?}"));
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(environ(&out), ["PATH=/bin", want], "{}", describe(&out));
    }

    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["process"]["env"] = env.clone();
    }) else { return };
    let id = format!("env2-{who:?}");
    b.create(&id);
    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = b.oci(&["exec", "--env", "A=3", "--env", "C=4", &id, "cat", "/proc/self/environ"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(environ(&out), ["PATH=/bin", "A=3", "B=x=y", "E=", "C=4", "HOME=/"], "{}", describe(&out));
    let out = b.oci(&["exec", "--env", "NOVALUE", &id, "true"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--env: \"NOVALUE\" has no `=`"), "{}", describe(&out));
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));

    // An entry execve cannot take is refused, naming it.
    let Some(b) = Bundle::new(who, &["true"], |c| {
        c["process"]["env"] = json!(["PATH=/bin", "NOVALUE"]);
    }) else { return };
    let out = b.run(&format!("env3-{who:?}"));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`process.env[1]`"), "{}", describe(&out));
});

// The process is searched in the config's PATH as execvp does: missing everywhere is 127,
// found but not executable is 126, naming the file.
both!(fn a_missing_or_unexecutable_process_exits_127_or_126(who) {
    let Some(b) = Bundle::new(who, &["no-such-program"], |_| {}) else { return };
    let out = b.run(&format!("x1-{who:?}"));
    assert_eq!(out.status.code(), Some(127), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot execute \"no-such-program\""), "{}", describe(&out));

    let Some(b) = Bundle::new(who, &["not-executable"], |_| {}) else { return };
    let file = b.path().join("rootfs/bin/not-executable");
    std::fs::write(&file, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = b.run(&format!("x2-{who:?}"));
    assert_eq!(out.status.code(), Some(126), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(/bin/not-executable)") && err.contains("EACCES"), "{}", describe(&out));
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    // As runc, what keeps the process from running fails `create`, not the started
    // container: with the code (podman maps runc's words for it to 127 and 126), and
    // nothing left behind. A cwd that does not exist likewise.
    let Some(b) = Bundle::new(who, &["no-such-program"], |_| {}) else { return };
    let id = format!("x3-{who:?}");
    let out = b.oci(&b.bundle_args("create", &id).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(127), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("executable file not found in $PATH"), "{}", describe(&out));
    assert!(!b.oci(&["state", &id]).status.success(), "no container is left after a failed create");
    // A name with a `/` is not searched in PATH: runc's words for it.
    let Some(b) = Bundle::new(who, &["/bin/nope"], |_| {}) else { return };
    let out = b.run(&format!("x5-{who:?}"));
    assert_eq!(out.status.code(), Some(127), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no such file or directory") && !err.contains("$PATH"), "{}", describe(&out));
    // The search decides as execve will, with the effective capabilities: uid 1000 holding
    // CAP_DAC_OVERRIDE runs a program only root may execute (plain access(2) said EACCES).
    if who == Who::Root {
        let caps = json!(["CAP_DAC_OVERRIDE"]);
        let Some(b) = Bundle::new(who, &["/bin/rootonly"], |c| {
            c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
            for set in ["bounding", "effective", "permitted", "inheritable", "ambient"] {
                c["process"]["capabilities"][set] = caps.clone();
            }
        }) else { return };
        let file = b.path().join("rootfs/bin/rootonly");
        std::fs::write(&file, "#!/bin/sh\necho ran\n").unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let out = b.run("x6");
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n", "{}", describe(&out));
    }
    // A missing cwd is made (as runc and crun make it), even in a read-only root; one below
    // a file fails create.
    let Some(b) = Bundle::new(who, &["sh", "-c", "pwd; ls -ld /new/dir | cut -c1-10"], |c| {
        c["process"]["cwd"] = json!("/new/dir");
        c["root"]["readonly"] = json!(true);
    }) else { return };
    let out = b.run(&format!("x7-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/new/dir\ndrwxr-xr-x\n", "{}", describe(&out));
    let Some(b) = Bundle::new(who, &["true"], |c| c["process"]["cwd"] = json!("/bin/busybox/dir")) else { return };
    let id = format!("x4-{who:?}");
    let out = b.oci(&b.bundle_args("create", &id).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("enter process.cwd: /bin/busybox/dir: ENOTDIR"), "{}", describe(&out));
    assert!(!b.oci(&["state", &id]).status.success(), "no container is left after a failed create");
});

both!(fn pause_and_resume(who) {
    if !gets_a_cgroup(who, "pause_and_resume") {
        return;
    }
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    let id = "p1";
    let a = b.bundle_args("run", id);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--detach");
    let out = b.oci(&a);
    assert!(out.status.success(), "{}", describe(&out));
    let out = b.oci(&["pause", id]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(b.state(id)["status"], "paused");
    let pid = b.state(id)["pid"].as_i64().unwrap();
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let letter = st[st.rfind(')').unwrap() + 2..].chars().next().unwrap();
    assert!(letter == 'D' || letter == 'S' || letter == 'T', "{st}");
    let out = b.oci(&["resume", id]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(b.state(id)["status"], "running");
    let out = b.oci(&["ps", "--format", "json", id]);
    let pids: Vec<i64> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pids, [pid], "{}", describe(&out));
    let out = b.oci(&["delete", "--force", id]);
    assert!(out.status.success(), "{}", describe(&out));
    // SIGKILL to a paused container kills it (thawed after, as runc): `podman kill` of a
    // paused container left it frozen and alive. Another signal leaves it paused.
    let id = "p2";
    let a = b.bundle_args("run", id);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--detach");
    let out = b.oci(&a);
    assert!(out.status.success(), "{}", describe(&out));
    let out = b.oci(&["pause", id]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = b.oci(&["kill", id, "USR1"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(b.state(id)["status"], "paused", "a signal other than SIGKILL does not thaw");
    let out = b.oci(&["kill", id, "KILL"]);
    assert!(out.status.success(), "{}", describe(&out));
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while b.state(id)["status"] != "stopped" && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(b.state(id)["status"], "stopped", "SIGKILL must kill a paused container");
    let out = b.oci(&["delete", id]);
    assert!(out.status.success(), "{}", describe(&out));
});

#[test]
fn containerd_runs_a_container() {
    if !running_as_root() {
        skip!("SKIP: the containerd test runs as root");
        return;
    }
    if !Path::new("/run/containerd/containerd.sock").exists() {
        skip_unless_required!(
            "SKIP: containerd is not running (no /run/containerd/containerd.sock)"
        );
        return;
    }
    match Command::new("ctr")
        .args(["--timeout", "5s", "version"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        _ => {
            skip_unless_required!(
                "SKIP: containerd is not installed or not running (`ctr version` failed)"
            );
            return;
        }
    }
    let Some(b) = Bundle::new(Who::Root, &["true"], |_| {}) else {
        return;
    };
    let id = format!("cordon-oci-test-{}", std::process::id());
    // --cpu-quota alone: ctr sends `"period": 0`, which runc (and so cordon-oci) takes as
    // not given.
    let out = Command::new("ctr")
        .args(["run", "--rm", "--cpu-quota", "20000", "--runc-binary"])
        .arg(oci_bin())
        .arg("--rootfs")
        .arg(b.path().join("rootfs"))
        .args([&id, "sh", "-c", "echo hi from containerd; exit 6"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi from containerd\n");
}

/// (device, inode) of what `path` leads to.
fn file_id(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.dev(), m.ino())
}

// CVE-2019-5736: the container's init runs cordon-oci until `start`; its /proc/PID/exe
// must lead to a copy nobody can write, never to the host's binary a container root could
// rewrite: as root, the binary seen through a read-only overlayfs without an upper layer;
// unprivileged (no right to mount), a sealed memfd copy.
both!(fn init_runs_from_a_sealed_copy(who) {
    use nix::sys::{statfs, statvfs};
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    let id = format!("exe-{who:?}");
    let pid = b.create(&id);
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let link = std::fs::read_link(&exe).unwrap();
    let f = std::fs::File::open(&exe).unwrap();
    let on_overlay = statfs::fstatfs(&f).unwrap().filesystem_type() == statfs::OVERLAYFS_SUPER_MAGIC;
    let overlay_fs = std::fs::read_to_string("/proc/filesystems").unwrap().contains("\toverlay\n");
    if who == Who::Root && overlay_fs {
        assert!(on_overlay, "the init runs from {}, not from cordon-oci's overlay", link.display());
        let ro = statvfs::fstatvfs(&f).unwrap().flags().contains(statvfs::FsFlags::ST_RDONLY);
        assert!(ro, "the overlay the init runs from is writable");
    } else {
        assert!(
            link.to_string_lossy().starts_with("/memfd:cordon-oci"),
            "the init runs from {}", link.display()
        );
    }
    assert_ne!(file_id(&exe), file_id(oci_bin()), "the init holds the host's cordon-oci");
    // The same bytes as the host's binary, though.
    assert_eq!(std::fs::read(&exe).unwrap(), std::fs::read(oci_bin()).unwrap());
    // Non-dumpable until its execve: /proc/PID files then belong to the host's root.
    use std::os::unix::fs::MetadataExt;
    let st = std::fs::metadata(format!("/proc/{pid}/status")).unwrap();
    assert_eq!((st.uid(), st.gid()), (0, 0), "the init is dumpable");
    // Even root cannot write to it: a read-only overlay (EROFS), or a memfd being executed
    // (ETXTBSY) and sealed (EPERM).
    let wrote = std::fs::OpenOptions::new()
        .write(true)
        .open(&exe)
        .and_then(|mut f| std::io::Write::write(&mut f, b"#!/bin/sh\n"));
    let e = wrote.expect_err("wrote into the init's executable");
    let expected: &[i32] = if on_overlay { &[libc::EROFS] } else { &[libc::EPERM, libc_etxtbsy()] };
    assert!(e.raw_os_error().is_some_and(|c| expected.contains(&c)), "{e}");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// CVE-2024-21626: an fd cordon-oci inherits without close-on-exec (here a host directory
// as fd 7) must not reach a process started by `exec`.
both!(fn exec_does_not_leak_inherited_fds(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    let id = format!("fd-{who:?}");
    let a = b.bundle_args("run", &id);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--detach");
    let out = b.oci(&a);
    assert!(out.status.success(), "run --detach: {}", describe(&out));
    b.wait_status(&id, "running");
    // Through sh, which opens fd 7 on a host directory and runs `cordon-oci exec` with it.
    let cmd = b.command(&["exec", &id, "ls", "/proc/self/fd"]);
    let prog = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|s| s.to_owned()).collect();
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec 7</etc; exec \"$0\" \"$@\"")
        .arg(prog)
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "exec: {}", describe(&out));
    let fds: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect();
    assert!(fds.contains(&"0".to_string()), "{}", describe(&out));
    assert!(!fds.contains(&"7".to_string()), "fd 7 (the host's /etc) leaked into the container: {}", describe(&out));
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// CVE-2019-19921 class: an image whose /proc is a symlink must not get procfs elsewhere
// (where maskedPaths and readonlyPaths would not cover it).
both!(fn proc_mount_through_a_symlink_is_refused(who) {
    let Some(b) = Bundle::new(who, &["true"], |_| {}) else { return };
    let proc_dir = b.path().join("rootfs/proc");
    let _ = std::fs::remove_dir(&proc_dir);
    std::os::unix::fs::symlink("/", &proc_dir).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run(&format!("ps-{who:?}"));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not through a symlink"), "{}", describe(&out));
});

// Mount points are created inside the root, whatever the image's symlinks point at: an
// absolute symlink to a host directory leads into the rootfs, not to the host.
both!(fn mount_points_are_created_inside_the_root(who) {
    let host = shared_tempdir();
    let host_dir = host.path().to_path_buf();
    let Some(b) = Bundle::new(who, &["sh", "-c", "cat /data/sub/f"], |c| {
        c["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/data/sub/f", "type": "bind", "source": "/etc/hostname", "options": ["bind", "ro"]
        }));
    }) else { return };
    std::os::unix::fs::symlink(&host_dir, b.path().join("rootfs/data")).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run(&format!("mp-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        std::fs::read_to_string("/etc/hostname").unwrap().trim()
    );
    assert!(!host_dir.join("sub").exists(), "a mount point was created on the host");
    let inside = b.path().join("rootfs").join(host_dir.strip_prefix("/").unwrap()).join("sub/f");
    assert!(inside.exists(), "{} missing", inside.display());
});

// A masked or read-only path that cannot be inspected (here a symlink loop) fails the
// create: it is never left unmasked in silence.
both!(fn masked_path_errors_fail_closed(who) {
    for field in ["maskedPaths", "readonlyPaths"] {
        let Some(b) = Bundle::new(who, &["true"], |c| {
            c["linux"][field] = json!(["/loop/x"]);
        }) else { return };
        std::os::unix::fs::symlink("/loop", b.path().join("rootfs/loop")).unwrap();
        if who == Who::User {
            b.chown();
        }
        let out = b.run(&format!("mk-{who:?}"));
        assert!(!out.status.success(), "{field}: {}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("linux.{field}")), "{}", describe(&out));
    }
});

// `exec` runs with the config `create` checked: editing config.json afterwards (here to
// every capability) does not widen what an exec'd process gets.
both!(fn exec_ignores_a_config_edited_after_create(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |_| {}) else { return };
    let id = format!("ed-{who:?}");
    let a = b.bundle_args("run", &id);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--detach");
    let out = b.oci(&a);
    assert!(out.status.success(), "run --detach: {}", describe(&out));
    let pid = b.wait_status(&id, "running")["pid"].as_i64().unwrap();
    let bnd = |status: &str| status.lines().find(|l| l.starts_with("CapBnd:")).map(str::to_string);
    let want = bnd(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap()).unwrap();
    let cfg_path = b.path().join("config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    let all: Vec<String> = ["CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_MODULE", "CAP_DAC_READ_SEARCH"]
        .iter().map(|s| s.to_string()).collect();
    for set in ["bounding", "effective", "permitted"] {
        cfg["process"]["capabilities"][set] = json!(all);
    }
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let out = b.oci(&["exec", &id, "cat", "/proc/self/status"]);
    assert!(out.status.success(), "exec: {}", describe(&out));
    assert_eq!(bnd(&String::from_utf8_lossy(&out.stdout)).unwrap(), want, "{}", describe(&out));
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// `start` returns once the container's program runs (a signal sent right after reaches it,
// not cordon's setup), also when the caller cannot read the non-dumpable init's exe.
both!(fn start_returns_once_the_program_runs(who) {
    // A startContainer hook (in the container, between the go and the execve) makes the
    // setup slow enough to see a `start` that returns early.
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["hooks"] = json!({"startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "sleep 1"]}]});
    }) else { return };
    let id = format!("st-{who:?}");
    let pid = b.create(&id);
    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "start: {}", describe(&out));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "sleep");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// --preserve-fds names descriptors the caller opened: a number it did not open would be
// taken by one of cordon-oci's own (exec.fifo, a pipe to the init) and reach the program.
// Item 9 of the second OCI review: the descriptors of socket activation (LISTEN_FDS, with
// LISTEN_PID cordon-oci's pid) were closed by the init. Now, as runc, they reach the
// container's process from 3 on, before --preserve-fds ones, with LISTEN_FDS and LISTEN_PID
// (its pid in its own pid namespace: 1).
both!(fn socket_activation_descriptors_reach_the_container(who) {
    let Some(b) = Bundle::new(
        who,
        &["sh", "-c", "echo $LISTEN_FDS $LISTEN_PID; cat <&3; cat <&4"],
        |_| {},
    ) else { return };
    for (f, text) in [("listen", "from-listen-fd"), ("preserved", "from-preserved-fd")] {
        std::fs::write(b.path().join(f), text).unwrap();
    }
    b.chown();
    let path = b.path().display().to_string();
    let opener = format!(
        "exec 3<{path}/listen 4<{path}/preserved; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$@\""
    );
    let id = format!("listen-{who:?}");
    let args = ["run", "--preserve-fds", "1", "--bundle", &path, &id];
    let out = b.oci_under(&["sh", "-c", &opener, "sh"], &args);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1 1\nfrom-listen-fdfrom-preserved-fd",
        "{}",
        describe(&out)
    );
});

both!(fn preserve_fds_must_name_open_descriptors(who) {
    let Some(b) = Bundle::new(who, &["ls", "/proc/self/fd"], |_| {}) else { return };
    let a = b.bundle_args("run", "pfd");
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--preserve-fds");
    a.insert(2, "4");
    // std's Command leaves the child 0-2 only (its own descriptors are close-on-exec).
    let out = b.oci(&a);
    assert!(!out.status.success(), "{}", describe(&out));
    // (Descriptor 3, unless the test harness passed some of its own down.)
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--preserve-fds 4: descriptor ") && stderr.contains(" is not open"), "{}", describe(&out));
    assert!(out.stdout.is_empty(), "the program ran: {}", describe(&out));
});

// CVE-2024-21626: process.cwd through /proc/self/fd of a host directory (here one passed
// with --preserve-fds) must not start the program outside the container's root.
both!(fn cwd_outside_the_root_is_refused(who) {
    let Some(b) = Bundle::new(who, &["cat", "hostname"], |c| {
        c["process"]["cwd"] = json!("/proc/self/fd/3");
    }) else { return };
    let id = format!("cwd-{who:?}");
    let a = b.bundle_args("run", &id);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.insert(1, "--preserve-fds");
    a.insert(2, "1");
    let cmd = b.command(&a);
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec 3</etc; exec \"$0\" \"$@\"")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let host = std::fs::read_to_string("/etc/hostname").unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains(host.trim()), "read the host's /etc: {}", describe(&out));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the container's root"), "{}", describe(&out));
});

// Device nodes and /dev symlinks are made inside the root even when the image's /dev is
// an absolute symlink to a host directory (no /dev tmpfs here).
both!(fn devices_are_created_inside_the_root(who) {
    let host = shared_tempdir();
    let host_dir = host.path().to_path_buf();
    let Some(b) = Bundle::new(who, &["sh", "-c", "echo x > /dev/null && ls -l /dev/null /dev/fd"], |c| {
        c["mounts"].as_array_mut().unwrap().retain(|m| m["destination"] != "/dev");
    }) else { return };
    std::os::unix::fs::symlink(&host_dir, b.path().join("rootfs/dev")).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run(&format!("dv-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("/proc/self/fd"), "{}", describe(&out));
    // The config's mode (0666), not one reduced by cordon-oci's umask.
    assert!(String::from_utf8_lossy(&out.stdout).contains("crw-rw-rw-"), "{}", describe(&out));
    for n in ["null", "zero", "fd", "ptmx"] {
        assert!(std::fs::symlink_metadata(host_dir.join(n)).is_err(), "/dev/{n} was made on the host");
    }
    let inside = b.path().join("rootfs").join(host_dir.strip_prefix("/").unwrap());
    assert!(std::fs::symlink_metadata(inside.join("null")).is_ok(), "{} has no null", inside.display());
});

/// The container's cgroup v2 directory, from the `0::` line of /proc/PID/cgroup.
fn v2_cgroup_of(pid: i64) -> PathBuf {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let p = cg
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no 0:: line: {cg}"));
    Path::new("/sys/fs/cgroup").join(p.trim_start_matches('/'))
}

fn read_trim(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

// cgroup v2: the container's cgroup is made where runc would make it (root: cordon/<id>;
// unprivileged: next to the delegated cgroup cordon-oci started in), holds linux.resources
// as memory.max / pids.max / cpu.max, `update` changes them (a quota alone keeps the
// period), `events --stats` reads them, `ps` reads cgroup.procs, `exec` joins it, pause
// freezes it (cgroup.freeze, cgroup.events) and reads `paused`, and delete removes it.
both!(fn cgroup_v2_resources_update_pause_delete(who) {
    if cgroup_layout() != CgroupLayout::PureV2 {
        skip!("SKIP: cgroup_v2_resources_update_pause_delete: this host is not pure cgroup v2 (scripts/vm-test runs it in a v2 guest)");
        return;
    }
    if !gets_a_cgroup(who, "cgroup_v2_resources_update_pause_delete") {
        return;
    }
    // Block I/O limits as root (a user's delegated cgroup has no io controller), on a whole
    // disk: in the guest of scripts/vm-test, brd's /dev/ram0.
    let disk = (who == Who::Root)
        .then(|| std::fs::read_dir("/sys/dev/block").ok())
        .flatten()
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.path().join("partition").exists())
        .find_map(|e| e.file_name().to_str().map(String::from));
    if who == Who::Root && disk.is_none() {
        eprintln!("SKIP: cgroup_v2_resources_update_pause_delete: blockIO: this host has no block device");
    }
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["linux"]["resources"] = json!({
            "memory": {"limit": 67108864},
            "pids": {"limit": 17},
            "cpu": {"quota": 50000, "period": 200000, "burst": 10000, "idle": 1}
        });
        if who == Who::Root {
            c["linux"]["resources"]["hugepageLimits"] = json!([{"pageSize": "2MB", "limit": 4194304}]);
        }
        if let Some((ma, mi)) = disk.as_deref().and_then(|d| d.split_once(':')) {
            let (ma, mi): (i64, i64) = (ma.parse().unwrap(), mi.parse().unwrap());
            c["linux"]["resources"]["blockIO"] = json!({
                "weight": 500,
                "throttleReadBpsDevice": [{"major": ma, "minor": mi, "rate": 1048576}],
                "throttleWriteIOPSDevice": [{"major": ma, "minor": mi, "rate": 100}]
            });
        }
    }) else { return };
    let id = format!("v2-{who:?}");
    let pid = b.create(&id);
    let cg = v2_cgroup_of(pid);
    let want = match who {
        Who::Root => PathBuf::from(format!("/sys/fs/cgroup/cordon/{id}")),
        Who::User => cgroup_scopes().unwrap().join("user").join(format!("cordon-{id}")),
    };
    assert_eq!(cg, want, "the container's cgroup is not where it belongs");
    assert_eq!(read_trim(&cg.join("memory.max")), "67108864");
    assert_eq!(read_trim(&cg.join("pids.max")), "17");
    assert_eq!(read_trim(&cg.join("cpu.max")), "50000 200000");
    assert_eq!(read_trim(&cg.join("cpu.max.burst")), "10000");
    assert_eq!(read_trim(&cg.join("cpu.idle")), "1");
    if who == Who::Root {
        assert_eq!(read_trim(&cg.join("hugetlb.2MB.max")), "4194304");
        if cg.join("hugetlb.2MB.rsvd.max").exists() {
            assert_eq!(read_trim(&cg.join("hugetlb.2MB.rsvd.max")), "4194304");
        }
    }
    if let Some(d) = &disk {
        assert_eq!(read_trim(&cg.join("io.max")), format!("{d} rbps=1048576 wbps=max riops=max wiops=100"));
        // io.weight's scale (1-10000) from blkio's (10-1000), unless BFQ's io.bfq.weight is there.
        let (file, before, after) = if cg.join("io.bfq.weight").exists() {
            ("io.bfq.weight", "500", "1000")
        } else {
            ("io.weight", "default 4950", "default 10000")
        };
        let first = |f: &str| read_trim(&cg.join(f)).lines().next().unwrap_or("").to_string();
        assert!(first(file).ends_with(before), "{file}: {}", first(file));
        let out = b.oci(&["update", "--blkio-weight", "1000", &id]);
        assert!(out.status.success(), "update: {}", describe(&out));
        assert!(first(file).ends_with(after), "{file}: {}", first(file));
    }

    let out = b.oci(&["update", "--memory", "134217728", "--pids-limit", "33", "--cpu-quota", "25000", &id]);
    assert!(out.status.success(), "update: {}", describe(&out));
    assert_eq!(read_trim(&cg.join("memory.max")), "134217728");
    assert_eq!(read_trim(&cg.join("pids.max")), "33");
    assert_eq!(read_trim(&cg.join("cpu.max")), "25000 200000", "update of the quota changed the period");
    let out = b.oci(&["update", "--cpu-period", "100000", &id]);
    assert!(out.status.success(), "update: {}", describe(&out));
    assert_eq!(read_trim(&cg.join("cpu.max")), "25000 100000", "update of the period dropped the quota");

    let out = b.oci(&["events", "--stats", &id]);
    assert!(out.status.success(), "events --stats: {}", describe(&out));
    let ev: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    assert_eq!(ev["data"]["memory"]["usage"]["limit"], 134217728, "{ev}");
    assert!(ev["data"]["pids"]["current"].as_u64().is_some_and(|n| n >= 1), "{ev}");
    assert!(ev["data"]["memory"]["usage"]["usage"].as_u64().is_some_and(|n| n > 0), "{ev}");
    // No limit: memory.max reads `max`, reported as the largest u64 (as runc does), not 0.
    let out = b.oci(&["update", "--memory", "-1", &id]);
    assert!(out.status.success(), "update: {}", describe(&out));
    assert_eq!(read_trim(&cg.join("memory.max")), "max");
    let out = b.oci(&["events", "--stats", &id]);
    let ev: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    assert_eq!(ev["data"]["memory"]["usage"]["limit"], u64::MAX, "{ev}");

    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "start: {}", describe(&out));
    assert_eq!(b.wait_status(&id, "running")["status"], "running");
    let out = b.oci(&["ps", "--format", "json", &id]);
    assert!(out.status.success(), "ps: {}", describe(&out));
    let pids: Vec<i64> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pids, [pid], "{}", describe(&out));
    // A process started by `exec` moves itself into the container's cgroup: the root of the
    // container's cgroup namespace, as for its init (from anywhere else it would read a
    // path with `..`).
    let out = b.oci(&["exec", &id, "cat", "/proc/self/cgroup", "/proc/1/cgroup"]);
    assert!(out.status.success(), "exec: {}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0::/\n0::/\n", "{}", describe(&out));

    let out = b.oci(&["pause", &id]);
    assert!(out.status.success(), "pause: {}", describe(&out));
    assert_eq!(read_trim(&cg.join("cgroup.freeze")), "1");
    assert!(read_trim(&cg.join("cgroup.events")).lines().any(|l| l == "frozen 1"), "pause returned before the cgroup froze");
    assert_eq!(b.state(&id)["status"], "paused");
    let out = b.oci(&["resume", &id]);
    assert!(out.status.success(), "resume: {}", describe(&out));
    assert_eq!(read_trim(&cg.join("cgroup.freeze")), "0");
    assert_eq!(b.state(&id)["status"], "running");

    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "delete: {}", describe(&out));
    assert!(!cg.exists(), "the cgroup {} outlived delete", cg.display());
    assert!(!b.oci(&["state", &id]).status.success());
});

// linux.devices is made as asked, or create fails naming the device; never dropped, never
// another node under its name. A FIFO is made in any case (it needs no privilege). In a user
// namespace (the unprivileged caller's container) a device is the host's node bound in: one
// whose numbers differ from the config's, or whose mode is more open than the config's
// fileMode, is refused. A config that binds the host's /dev brings its own nodes: a device
// missing there is a warning, one present runs without one.
both!(fn linux_devices_are_made_as_asked_or_refused(who) {
    let fifo = json!([{"path": "/dev/myfifo", "type": "p", "fileMode": 420}]);
    let Some(b) = Bundle::new(who, &["sh", "-c", "[ -p /dev/myfifo ] && echo FIFO"], |c| {
        c["linux"]["devices"] = fifo.clone();
    }) else { return };
    let out = b.run("dev-fifo");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("FIFO"),
        "{}",
        describe(&out)
    );
    if who == Who::User {
        for (dev, want) in [
            // /dev/null is 1:3 on every host, not 1:5.
            (json!({"path": "/dev/null", "type": "c", "major": 1, "minor": 5, "fileMode": 438}), "not the c 1:5"),
            // The host's /dev/null is 0666: a bound node would not be 0600.
            (json!({"path": "/dev/null", "type": "c", "major": 1, "minor": 3, "fileMode": 384}), "fileMode 600"),
        ] {
            let Some(b) = Bundle::new(who, &["true"], |c| c["linux"]["devices"] = json!([dev])) else { return };
            let out = b.run("dev-userns");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && err.contains("/dev/null") && err.contains(want),
                "want {want:?}: {}",
                describe(&out)
            );
        }
    }
    let host_dev = |c: &mut Value, dev: Value| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        mounts.retain(|m| !m["destination"].as_str().unwrap().starts_with("/dev"));
        mounts.push(json!({"destination": "/dev", "type": "bind", "source": "/dev", "options": ["rbind", "nosuid", "noexec"]}));
        c["linux"]["devices"] = json!([dev]);
    };
    let absent = json!({"path": "/dev/cordon-absent", "type": "c", "major": 1, "minor": 3, "fileMode": 438});
    // What the bound /dev lacks (a device renumbered since the config was written) is the
    // bound directory's to give, as runc has it: said, not failed.
    let Some(b) = Bundle::new(who, &["true"], |c| host_dev(c, absent)) else { return };
    let out = b.run("dev-bound-absent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && err.contains("warning: linux.devices[0] /dev/cordon-absent")
            && err.contains("/dev/cordon-absent is not there"),
        "{}",
        describe(&out)
    );
    let null = json!({"path": "/dev/null", "type": "c", "major": 1, "minor": 3, "fileMode": 438});
    let Some(b) = Bundle::new(who, &["sh", "-c", "echo ok > /dev/null && echo WROTE"], |c| host_dev(c, null)) else { return };
    let out = b.run("dev-bound-null");
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("WROTE")
            && !String::from_utf8_lossy(&out.stderr).contains("linux.devices"),
        "{}",
        describe(&out)
    );
});

// linux.resources.devices holds: a device node the config makes (/dev/tunx, the tun device
// 10:200) cannot be opened under a deny-all rule (EPERM from the devices controller on v1,
// from cordon-oci's eBPF device program on v2), nor without any rule (`"devices": []`, as
// `cordon-oci spec` writes: the list is an allowlist, as runc reads it), and can be once a
// rule allows it. An unprivileged cordon-oci cannot enforce device rules at all (no device
// program, no v1 devices files): it refuses rules that deny a node of linux.devices (bound
// from the host, so reached with the caller's own permissions), and runs, saying so, when
// they allow every such node.
both!(fn device_rules_are_enforced(who) {
    let allow_tun = json!({"allow": true, "type": "c", "major": 10, "minor": 200, "access": "rw"});
    if who == Who::User {
        // A host node the rootless container binds in: /dev/kmsg (1:11), which every kernel's
        // devtmpfs has (the VM guest has no /dev/net/tun).
        let kmsg = json!([{"path": "/dev/kmsg", "type": "c", "major": 1, "minor": 11, "fileMode": 420, "uid": 0, "gid": 0}]);
        let allow_kmsg = json!({"allow": true, "type": "c", "major": 1, "minor": 11, "access": "rw"});
        for allow in [false, true] {
            let Some(b) = Bundle::new(who, &["true"], |c| {
                c["linux"]["devices"] = kmsg.clone();
                let mut rules = vec![json!({"allow": false, "access": "rwm"})];
                if allow {
                    rules.push(allow_kmsg.clone());
                }
                c["linux"]["resources"] = json!({"devices": rules});
            }) else { return };
            let out = b.run(&format!("dev-user-{allow}"));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("linux.resources.devices"), "{}", describe(&out));
            if allow {
                assert!(out.status.success(), "rules allowing every node it is given: {}", describe(&out));
                assert!(stderr.contains("not enforced"), "{}", describe(&out));
            } else {
                assert!(!out.status.success(), "rules denying /dev/kmsg were dropped while it was bound in: {}", describe(&out));
                assert!(stderr.contains("/dev/kmsg"), "{}", describe(&out));
            }
        }
        return;
    }
    let tun = json!([{"path": "/dev/tunx", "type": "c", "major": 10, "minor": 200, "fileMode": 438, "uid": 0, "gid": 0}]);
    let mut stderr = Vec::new();
    for rules in [vec![], vec![json!({"allow": false, "access": "rwm"})], vec![json!({"allow": false, "access": "rwm"}), allow_tun]] {
        let n = rules.len();
        let Some(b) = Bundle::new(who, &["sh", "-c", "cat /dev/tunx"], |c| {
            c["linux"]["devices"] = tun.clone();
            c["linux"]["resources"] = json!({"devices": rules});
        }) else { return };
        let out = b.run(&format!("dev-{n}"));
        // Opened or not, reading an unattached tun device fails (EBADFD, or ENODEV where tun
        // is not loaded): the error says whether the device rules let it open.
        assert!(!out.status.success(), "{}", describe(&out));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("cordon-oci"), "the container did not start: {}", describe(&out));
        stderr.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    // Not among the defaults: the host's console (5:1), even to a container that may mknod.
    let Some(b) = Bundle::new(who, &["sh", "-c", "/bin/busybox mknod /dev/hostcon c 5 1 || exit 7; echo x >/dev/hostcon"], |c| {
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set] = json!(["CAP_MKNOD"]);
        }
    }) else { return };
    let out = b.run("dev-console");
    assert!(
        out.status.code() == Some(1) && String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "the host's console opened (or mknod failed, 7): {}",
        describe(&out)
    );
    assert!(stderr[0].contains("Operation not permitted"), "no rule at all let /dev/tunx open: {}", stderr[0]);
    assert!(stderr[1].contains("Operation not permitted"), "deny-all let /dev/tunx open: {}", stderr[1]);
    assert!(!stderr[2].contains("Operation not permitted"), "the allow rule did not let /dev/tunx open: {}", stderr[2]);
});

// cgroup v2: `update` with linux.resources.devices replaces the container's device program,
// with cgroup v1's meaning (the update's rules after the container's, then the defaults): a
// node denied at create (/dev/tunx, 10:200, under deny-all) opens once an update allows it,
// and no longer once a later update denies it again; the default devices stay allowed
// throughout. An unprivileged cordon-oci enforces no device rules, so its update of them is
// refused, naming the field.
both!(fn cgroup_v2_update_changes_device_rules(who) {
    if cgroup_layout() != CgroupLayout::PureV2 {
        skip!("SKIP: cgroup_v2_update_changes_device_rules: this host is not pure cgroup v2 (scripts/vm-test runs it in a v2 guest)");
        return;
    }
    if !gets_a_cgroup(who, "cgroup_v2_update_changes_device_rules") {
        return;
    }
    let tun = json!([{"path": "/dev/tunx", "type": "c", "major": 10, "minor": 200, "fileMode": 438, "uid": 0, "gid": 0}]);
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        if who == Who::Root {
            c["linux"]["devices"] = tun.clone();
            c["linux"]["resources"] = json!({"devices": [{"allow": false, "access": "rwm"}]});
        } else {
            // A limit, so that the unprivileged container gets a cgroup.
            c["linux"]["resources"] = json!({"pids": {"limit": 17}});
        }
    }) else { return };
    let id = format!("v2dev-{who:?}");
    b.create(&id);
    let update = |devices: Value| {
        let file = b.path().join("devices.json");
        std::fs::write(&file, serde_json::to_vec(&json!({"devices": devices})).unwrap()).unwrap();
        if who == Who::User {
            b.chown();
        }
        b.oci(&["update", "--resources", file.to_str().unwrap(), &id])
    };
    let tun_rule = |allow: bool| json!([{"allow": allow, "type": "c", "major": 10, "minor": 200, "access": "rw"}]);
    if who == Who::User {
        let out = update(tun_rule(true));
        assert!(!out.status.success(), "an unprivileged update of the device rules passed: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("linux.resources.devices") && stderr.contains("unprivileged"), "{}", describe(&out));
        let out = b.oci(&["delete", "--force", &id]);
        assert!(out.status.success(), "delete: {}", describe(&out));
        return;
    }
    let out = b.oci(&["start", &id]);
    assert!(out.status.success(), "start: {}", describe(&out));
    assert_eq!(b.wait_status(&id, "running")["status"], "running");
    // Whether /dev/tunx opens: reading an unattached tun device fails either way (EBADFD, or
    // ENODEV where tun is not loaded), with EPERM only when the device rules refuse the open.
    // /dev/null, a default device, must open every time.
    let tun_opens = || {
        let out = b.oci(&["exec", &id, "sh", "-c", "echo x >/dev/null && echo null-ok; cat /dev/tunx"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains("null-ok"), "/dev/null did not open: {}", describe(&out));
        assert!(!out.status.success(), "reading an unattached tun device passed: {}", describe(&out));
        assert!(!stderr.contains("cordon-oci"), "exec failed: {}", describe(&out));
        !stderr.contains("Operation not permitted")
    };
    assert!(!tun_opens(), "deny-all at create let /dev/tunx open");
    let out = update(tun_rule(true));
    assert!(out.status.success(), "update allowing 10:200: {}", describe(&out));
    assert!(tun_opens(), "the update allowing 10:200 did not let /dev/tunx open");
    let out = update(tun_rule(false));
    assert!(out.status.success(), "update denying 10:200: {}", describe(&out));
    assert!(!tun_opens(), "the update denying 10:200 left /dev/tunx open");
    // The update's rules come after the container's: one for another device changes nothing
    // for /dev/tunx.
    let out = update(json!([{"allow": true, "type": "c", "major": 1, "minor": 11, "access": "r"}]));
    assert!(out.status.success(), "update allowing 1:11: {}", describe(&out));
    assert!(!tun_opens(), "an update for another device let /dev/tunx open");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "delete: {}", describe(&out));
});

// F1 of the OCI review: on a cgroup v1/hybrid host a `cgroup` mount used to bind the host's
// whole /sys/fs/cgroup (every hierarchy's root, read-write below the tmpfs): the container's
// root rewrote host cgroups and moved itself out of its limits. Now each hierarchy shows the
// container's own cgroup, and with `ro` every mount below the destination is read-only.
both!(fn cgroup_v1_mount_shows_only_the_containers_cgroups(who) {
    if cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: cgroup_v1_mount_shows_only_the_containers_cgroups: not a cgroup v1 host");
        return;
    }
    // A cgroup of the host's at each hierarchy's root: none may show in the container (the
    // hierarchies the container has no cgroup of its own in, where the caller sits at the
    // root, are left out of the mount).
    let victim = format!("cordon-test-victim-{who:?}");
    let hierarchies = ["memory", "pids", "blkio", "systemd", "devices", "unified"];
    let script = format!(
        "for h in {}; do ls /sys/fs/cgroup/$h 2>/dev/null; done | grep -c {victim}; \
         echo $$ > /sys/fs/cgroup/memory/cgroup.procs && echo MOVED; \
         echo 1 > /sys/fs/cgroup/memory/memory.limit_in_bytes && echo WROTE; \
         grep ' /sys/fs/cgroup' /proc/self/mountinfo",
        hierarchies.join(" ")
    );
    let Some(b) = Bundle::new(who, &["sh", "-c", &script], |c| {
        if who == Who::Root {
            c["linux"]["resources"] = json!({"memory": {"limit": 67108864}});
        }
    }) else { return };
    // Removed however the test ends.
    struct Victims(Vec<PathBuf>);
    impl Drop for Victims {
        fn drop(&mut self) {
            for v in &self.0 {
                let _ = std::fs::remove_dir(v);
            }
        }
    }
    let victims = Victims(hierarchies.iter().map(|h| Path::new("/sys/fs/cgroup").join(h).join(&victim)).collect());
    if running_as_root() {
        for v in &victims.0 {
            let _ = std::fs::create_dir(v);
        }
    }
    let out = b.run(&format!("cg1-{who:?}"));
    drop(victims);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("0\n"), "the host's cgroups are visible: {}", describe(&out));
    assert!(!stdout.contains("MOVED") && !stdout.contains("WROTE"), "{}", describe(&out));
    // From the cgroup mount's tmpfs on (the rootless config binds the host's /sys first:
    // its cgroup mounts are listed, covered by the tmpfs).
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains(" /sys/fs/cgroup")).collect();
    let top = lines.iter().rposition(|l| l.split(' ').nth(4) == Some("/sys/fs/cgroup")).unwrap();
    let mounts = &lines[top..];
    // The tmpfs, and for root its own cgroups (memory, pids, ...).
    assert!(mounts.len() > if who == Who::Root { 2 } else { 0 }, "{}", describe(&out));
    for l in mounts {
        let opts = l.split(' ').nth(5).unwrap();
        assert!(l.contains(" - tmpfs ") || l.contains(" - cgroup"), "{l}");
        assert!(opts.split(',').any(|o| o == "ro"), "not read-only: {l}\n{}", describe(&out));
        if l.contains(" /sys/fs/cgroup/memory ") && who == Who::Root {
            // The container's own memory cgroup, at the hierarchy's mount point.
            assert_eq!(l.split(' ').nth(3), Some("/"), "{l}");
        }
    }
});

// A `cgroup` mount on a v1/hybrid host is made of binds, which take no filesystem options:
// one it was given (cgroup2's `nsdelegate`) fails create, naming the mount, instead of being
// dropped.
both!(fn cgroup_v1_mount_with_filesystem_options_is_refused(who) {
    if cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: cgroup_v1_mount_with_filesystem_options_is_refused: not a cgroup v1 host");
        return;
    }
    let Some(b) = Bundle::new(who, &["true"], |c| {
        for m in c["mounts"].as_array_mut().unwrap() {
            if m["type"] == "cgroup" {
                m["options"].as_array_mut().unwrap().push(json!("nsdelegate"));
            }
        }
    }) else { return };
    let out = b.run(&format!("cgopt-{who:?}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("take no filesystem options") && err.contains("nsdelegate"),
        "{}",
        describe(&out)
    );
});

// A `cgroup` mount without `ro` on a v1/hybrid host: the container's own cgroups (root's:
// it gets one per controller hierarchy, blkio, cpuset and name=systemd included) are
// writable, every other hierarchy (the caller's cgroup: the unified one; all of them for a
// rootless container, which gets none of its own on v1) stays read-only.
both!(fn cgroup_v1_mount_without_ro_writes_only_the_containers_own(who) {
    if cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: cgroup_v1_mount_without_ro_writes_only_the_containers_own: not a cgroup v1 host");
        return;
    }
    let script = "for h in memory pids blkio systemd; do \
                      mkdir /sys/fs/cgroup/$h/t 2>/dev/null && rmdir /sys/fs/cgroup/$h/t && echo WROTE_$h; \
                  done; grep ' /sys/fs/cgroup' /proc/self/mountinfo";
    let Some(b) = Bundle::new(who, &["sh", "-c", script], |c| {
        for m in c["mounts"].as_array_mut().unwrap() {
            if m["type"] == "cgroup" {
                let opts: Vec<Value> = m["options"].as_array().unwrap().iter().filter(|o| *o != "ro").cloned().collect();
                assert!(opts.len() < m["options"].as_array().unwrap().len(), "the spec's cgroup mount has no ro");
                m["options"] = json!(opts);
            }
        }
        if who == Who::Root {
            c["linux"]["resources"] = json!({"memory": {"limit": 67108864}});
        }
    }) else { return };
    let out = b.run(&format!("cg1rw-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let wrote: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("WROTE_")).collect();
    let named = Path::new("/sys/fs/cgroup/systemd/cgroup.procs").exists();
    let own: &[&str] = match who {
        Who::Root if named => &["memory", "pids", "blkio", "systemd"],
        Who::Root => &["memory", "pids", "blkio"],
        _ => &[],
    };
    assert_eq!(wrote, own, "{}", describe(&out));
    // The mounts from the cgroup mount's tmpfs on (see the test above).
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains(" /sys/fs/cgroup")).collect();
    let top = lines.iter().rposition(|l| l.split(' ').nth(4) == Some("/sys/fs/cgroup")).unwrap();
    let mut seen = Vec::new();
    for l in &lines[top + 1..] {
        let name = l.split(' ').nth(4).unwrap().trim_start_matches("/sys/fs/cgroup/");
        let ro = l.split(' ').nth(5).unwrap().split(',').any(|o| o == "ro");
        if ["memory", "pids", "blkio", "systemd", "unified"].contains(&name) {
            seen.push(name);
            assert_eq!(ro, !own.contains(&name), "{l}\n{}", describe(&out));
        }
    }
    // The others show the caller's cgroup, or nothing when that is the hierarchy's root.
    let want: Vec<&str> = ["memory", "pids", "blkio", "systemd", "unified"]
        .into_iter()
        .filter(|h| own.contains(h) || !caller_at_hierarchy_root(h))
        .collect();
    seen.sort_unstable();
    let mut want = want;
    want.sort_unstable();
    assert_eq!(seen, want, "{}", describe(&out));
});

/// Whether this process sits at the root of the v1 hierarchy `name` (`systemd` for
/// name=systemd, `unified` for the cgroup2 one), per /proc/self/cgroup.
fn caller_at_hierarchy_root(name: &str) -> bool {
    let me = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    me.lines().any(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        let matches = match name {
            "unified" => ctrls.is_empty(),
            "systemd" => ctrls == "name=systemd",
            _ => ctrls.split(',').any(|c| c == name),
        };
        matches && path == "/"
    })
}

// The `ro` cgroup mount of a rootless container on a pure cgroup v2 host: a user namespace
// may not mount cgroup2, so the host's hierarchy is bound recursively and made read-only with
// every mount below it. This host may be v1/hybrid: cordon-oci runs in a mount namespace of
// its own whose /sys/fs/cgroup is only a cgroup2 mount (pure v2 as cordon-oci sees it), with
// a tmpfs on a cgroup below it standing for a submount.
#[test]
fn cgroup_mount_of_a_rootless_container_on_pure_v2_is_read_only_below() {
    if !running_as_root() || test_user().is_none() {
        skip!(
            "SKIP: cgroup_mount_of_a_rootless_container_on_pure_v2_is_read_only_below: needs root and the test user"
        );
        return;
    }
    let who = Who::User;
    let sub = format!("cordon-test-v2ro-{}", std::process::id());
    let script = format!(
        "touch /sys/fs/cgroup/{sub}/x 2>/dev/null && echo WROTE_SUB; \
         mkdir /sys/fs/cgroup/t 2>/dev/null && echo WROTE_TOP; \
         grep ' /sys/fs/cgroup' /proc/self/mountinfo"
    );
    let Some(b) = Bundle::new(who, &["sh", "-c", &script], |c| {
        let m = c["mounts"].as_array().unwrap();
        let cg = m
            .iter()
            .find(|m| m["type"] == "cgroup")
            .expect("the rootless spec's cgroup mount");
        assert!(
            cg["options"].as_array().unwrap().iter().any(|o| o == "ro"),
            "{cg}"
        );
        let ns = c["linux"]["namespaces"].as_array_mut().unwrap();
        assert!(ns.iter().any(|n| n["type"] == "user"));
        // Without a cgroup namespace (with one, cgroup2 is mounted) and, the caller being in
        // the root cgroup, without a cgroup of its own: the host's hierarchy is bound.
        ns.retain(|n| n["type"] != "cgroup");
    }) else {
        return;
    };
    // Pure v2 for cordon-oci: the v1 hierarchies unmounted, cgroup2 at /sys/fs/cgroup.
    let setup = format!(
        "umount -R /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup || exit 125
         mkdir /sys/fs/cgroup/{sub} && mount -t tmpfs -o mode=777 none /sys/fs/cgroup/{sub} || exit 125
         \"$@\"; rc=$?
         umount /sys/fs/cgroup/{sub}; rmdir /sys/fs/cgroup/{sub}; exit $rc"
    );
    let out = run_under_private_mounts(&b, "v2ro", &setup);
    // In case the namespace's clean-up did not run (a cgroup of the host's hierarchy).
    for root in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        let _ = std::fs::remove_dir(Path::new(root).join(&sub));
    }
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("WROTE"),
        "the cgroup mount is writable: {}",
        describe(&out)
    );
    // From the cgroup mount on: the cgroup2 bind and the tmpfs below it, both read-only.
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" /sys/fs/cgroup"))
        .collect();
    let top = lines
        .iter()
        .rposition(|l| l.split(' ').nth(4) == Some("/sys/fs/cgroup"))
        .unwrap();
    let mounts = &lines[top..];
    assert!(mounts[0].contains(" - cgroup2 "), "{}", describe(&out));
    let below = format!("/sys/fs/cgroup/{sub}");
    assert!(
        mounts
            .iter()
            .any(|l| l.split(' ').nth(4) == Some(below.as_str())),
        "{}",
        describe(&out)
    );
    for l in mounts {
        assert!(
            l.split(' ').nth(5).unwrap().split(',').any(|o| o == "ro"),
            "not read-only: {l}\n{}",
            describe(&out)
        );
    }
}

/// `run` of `b`'s bundle as `id`, under `unshare -m` (a private mount namespace, 60 s at most),
/// after `setup`: a shell script that ends by running `"$@"`, cordon-oci's command line.
fn run_under_private_mounts(b: &Bundle, id: &str, setup: &str) -> Output {
    let a = b.bundle_args("run", id);
    let inner = b.command(&a.iter().map(String::as_str).collect::<Vec<_>>());
    Command::new("timeout")
        .args([
            "60",
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            setup,
            "sh",
        ])
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Runs `b`'s config as the test user with `run`, in a mount namespace where cordon-oci sees a
/// pure cgroup v2 host (the v1 hierarchies unmounted, cgroup2 at /sys/fs/cgroup), started in
/// the cgroup `/<sub>/caller` of that hierarchy, `/<sub>` delegated to the test user (so that
/// its container gets its own cgroup `/<sub>/cordon-<id>`, beside the caller's).
fn run_rootless_on_pure_v2_in_a_delegated_cgroup(b: &Bundle, id: &str, sub: &str) -> Output {
    let u = test_user().unwrap();
    let setup = format!(
        "umount -R /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup || exit 125
         mkdir -p /sys/fs/cgroup/{sub}/caller && chown -R {}:{} /sys/fs/cgroup/{sub} || exit 125
         echo $$ >/sys/fs/cgroup/{sub}/caller/cgroup.procs || exit 125
         \"$@\"; rc=$?
         echo $$ >/sys/fs/cgroup/cgroup.procs; rmdir /sys/fs/cgroup/{sub}/*/ /sys/fs/cgroup/{sub}; exit $rc",
        u.uid, u.gid
    );
    let out = run_under_private_mounts(b, id, &setup);
    // In case the clean-up did not run (cgroups of the host's hierarchy).
    for root in [
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/systemd",
        "/sys/fs/cgroup",
    ] {
        let d = Path::new(root).join(sub);
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir(e.path());
        }
        let _ = std::fs::remove_dir(&d);
    }
    out
}

// Item 1 of the second OCI review: in a user namespace, a `cgroup` mount on pure v2 was always
// a bind of the host's whole hierarchy, even with the container's own cgroup namespace, where
// a real cgroup2 mount works. Now it is mounted (rooted at the container's cgroup); where the
// kernel refuses it (no cgroup namespace), the container's own cgroup is bound.
#[test]
fn cgroup_mount_of_a_rootless_container_on_pure_v2_shows_its_own_cgroup() {
    if !running_as_root() || test_user().is_none() {
        skip!(
            "SKIP: cgroup_mount_of_a_rootless_container_on_pure_v2_shows_its_own_cgroup: needs root and the test user"
        );
        return;
    }
    // pid 1 of the container is in the cgroup at the mount's top: its own, not the host's root.
    let script = "grep -qx 1 /sys/fs/cgroup/cgroup.procs && echo OWN; \
                  grep ' /sys/fs/cgroup ' /proc/self/mountinfo";
    for cgroupns in [true, false] {
        let Some(b) = Bundle::new(Who::User, &["sh", "-c", script], |c| {
            let ns = c["linux"]["namespaces"].as_array_mut().unwrap();
            ns.retain(|n| n["type"] != "cgroup");
            if cgroupns {
                ns.push(json!({"type": "cgroup"}));
            }
        }) else {
            return;
        };
        let sub = format!("cordon-test-v2own-{}-{cgroupns}", std::process::id());
        let out = run_rootless_on_pure_v2_in_a_delegated_cgroup(&b, "v2own", &sub);
        assert!(
            out.status.success(),
            "cgroupns {cgroupns}: {}",
            describe(&out)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("OWN"),
            "cgroupns {cgroupns}: {}",
            describe(&out)
        );
        let top = stdout.lines().last().unwrap_or_default();
        assert!(
            top.contains(" - cgroup2 "),
            "cgroupns {cgroupns}: {}",
            describe(&out)
        );
        if cgroupns {
            // A cgroup2 mount of the namespace: its root is the namespace's.
            assert_eq!(top.split(' ').nth(3), Some("/"), "{}", describe(&out));
        }
    }
}

// F2 of the OCI review: startContainer hooks (the container's own files) ran before the
// process's identity was applied: every capability, uid 0, no seccomp, no no_new_privs. They
// now run as runc runs them, with the process's final privileges and seccomp filter.
both!(fn start_container_hooks_run_with_the_process_privileges(who) {
    let report = "grep -E 'CapEff|NoNewPrivs|Seccomp:' /proc/self/status; id -u";
    let hook = format!("({report}; mkdir /tmp/d || echo HOOK_MKDIR_DENIED) > /tmp/hookout 2>&1");
    let process = format!("cat /tmp/hookout; echo ---; {report}");
    let Some(b) = Bundle::new(who, &["sh", "-c", &process], |c| {
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["mode=1777"]}),
        );
        if who == Who::Root {
            c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        }
        c["process"]["noNewPrivileges"] = json!(true);
        c["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]
        });
        c["hooks"] = json!({"startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", hook]}]});
    }) else { return };
    let out = b.run(&format!("sc-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (hook_out, process_out) = stdout.split_once("---\n").unwrap();
    assert!(hook_out.contains("HOOK_MKDIR_DENIED"), "the hook escaped seccomp: {}", describe(&out));
    let report_of = |s: &str| s.lines().filter(|l| !l.contains("mkdir") && !l.contains("HOOK_")).map(String::from).collect::<Vec<_>>();
    assert_eq!(report_of(hook_out), report_of(process_out), "{}", describe(&out));
    assert!(process_out.contains("NoNewPrivs:\t1") && process_out.contains("Seccomp:\t2"), "{}", describe(&out));
    if who == Who::Root {
        assert!(process_out.ends_with("1000\n"), "{}", describe(&out));
    }
});

// F3 of the OCI review: several `args` on the same index were ANDed, so an entry denying
// socket(AF_NETLINK) and socket(AF_PACKET) denied neither; they are alternatives (runc).
// A control run without the rule shows `ip link` works in this container, so the denied
// run's failure is the filter's, and its errno (ENOSYS, errnoRet 38) is checked.
both!(fn seccomp_conditions_on_one_argument_are_alternatives(who) {
    // busybox ip opens an AF_NETLINK (16) socket; AF_PACKET is 17.
    let run = |deny: bool, name: &str| {
        let b = Bundle::new(who, &["sh", "-c", "ip link >/dev/null; echo EXIT=$?"], |c| {
            let rules = if deny {
                json!([{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
                    "args": [{"index": 0, "value": 16, "op": "SCMP_CMP_EQ"},
                             {"index": 0, "value": 17, "op": "SCMP_CMP_EQ"}]}])
            } else {
                json!([])
            };
            c["linux"]["seccomp"] = json!({
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64"],
                "syscalls": rules
            });
        })?;
        std::os::unix::fs::symlink("busybox", b.path().join("rootfs/bin/ip")).unwrap();
        Some(b.run(&format!("{name}-{who:?}")))
    };
    let Some(control) = run(false, "sa-control") else { return };
    assert!(control.status.success(), "{}", describe(&control));
    assert_eq!(String::from_utf8_lossy(&control.stdout), "EXIT=0\n", "control run: {}", describe(&control));
    let denied = run(true, "sa-denied").unwrap();
    assert!(denied.status.success(), "{}", describe(&denied));
    assert_ne!(String::from_utf8_lossy(&denied.stdout), "EXIT=0\n", "{}", describe(&denied));
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(err.contains("ip: socket: Function not implemented"), "{}", describe(&denied));
});

// A seccomp filter that refuses getcwd (runtime-tools' linux_seccomp test has one) must not
// stop the container: the check that the cwd is inside the root (CVE-2024-21626) then walks
// up from it instead. Without no_new_privs the filter is in place before that check.
both!(fn a_filter_refusing_getcwd_does_not_stop_the_container(who) {
    for nnp in [false, true] {
        let Some(b) = Bundle::new(who, &["echo", "ran"], |c| {
            c["process"]["noNewPrivileges"] = json!(nnp);
            c["linux"]["seccomp"] = json!({
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64"],
                "syscalls": [{"names": ["getcwd"], "action": "SCMP_ACT_ERRNO"}]
            });
        }) else { return };
        let out = b.run(&format!("gcwd-{nnp}-{who:?}"));
        assert!(out.status.success(), "noNewPrivileges {nnp}: {}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n", "{}", describe(&out));
    }
});

// A cgroup hierarchy left out of the read-only cgroup mount (the caller sits at its root:
// conmon in name=systemd) still gets a mount point: podman `--systemd always` binds the
// container's systemd cgroup at /sys/fs/cgroup/systemd after the cgroup mount, and that
// failed with EROFS. (Pure cgroup v2 has one hierarchy and no such mount: nothing to check.)
both!(fn a_mount_below_the_cgroup_mount_finds_its_mount_point(who) {
    if cordon::limits::probe().version == cordon::limits::CgroupVersion::V2 {
        skip!("SKIP: a_mount_below_the_cgroup_mount_finds_its_mount_point: pure cgroup v2 has no v1 hierarchies");
        return;
    }
    let vol = common::shared_tempdir();
    common::write_world_readable(&vol.path().join("marker"), b"");
    let Some(b) = Bundle::new(who, &["ls", "/sys/fs/cgroup/systemd"], |c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        assert!(mounts.iter().any(|m| m["destination"] == "/sys/fs/cgroup"), "the default spec has a cgroup mount");
        mounts.push(json!({"destination": "/sys/fs/cgroup/systemd", "type": "bind", "source": vol.path(), "options": ["rbind"]}));
    }) else { return };
    let out = b.run(&format!("cgsd-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "marker\n", "{}", describe(&out));
});

// A tmpcopyup tmpfs takes the owner and mode of the directory it covers only when the image
// has one (as runc): on a mount point cordon-oci made, it keeps its own (`mode=`, else
// 1777). podman --read-only adds /tmp, /run and /var/tmp that way; they were 0755 and
// root's, so a non-root process could not write /tmp.
both!(fn a_tmpcopyup_tmpfs_keeps_its_mode_where_the_image_has_no_directory(who) {
    let script = "stat -c '%a' /run /x /kept";
    let Some(b) = Bundle::new(who, &["busybox", "sh", "-c", script], |c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        mounts.push(json!({"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": ["tmpcopyup"]}));
        mounts.push(json!({"destination": "/x", "type": "tmpfs", "source": "tmpfs", "options": ["tmpcopyup", "mode=1770"]}));
        mounts.push(json!({"destination": "/kept", "type": "tmpfs", "source": "tmpfs", "options": ["tmpcopyup"]}));
    }) else { return };
    let kept = b.path().join("rootfs/kept");
    std::fs::create_dir(&kept).unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o750)).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run(&format!("tcm-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1777\n1770\n750\n", "{}", describe(&out));
});

// F5 of the OCI review: tmpcopyup copied by path before pivot_root, so a directory swapped
// for a symlink mid-copy was followed on the host (3 of 60 runs printed the host's file). The
// copy now goes entry by entry through descriptors (O_NOFOLLOW, fstat), symlinks recreated.
both!(fn tmpcopyup_copies_without_following_swapped_symlinks(who) {
    let script = "ls -ln /data/sub/file | cut -c1-10; cat /data/sub/file; readlink /data/link; \
                  ls -ld /data/sub | cut -c1-10; head -c 40 /data/d/secret 2>&1";
    let Some(b) = Bundle::new(who, &["sh", "-c", script], |c| {
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/data", "type": "tmpfs", "source": "tmpfs", "options": ["tmpcopyup"]}),
        );
    }) else { return };
    let data = b.path().join("rootfs/data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    std::fs::write(data.join("sub/file"), "content\n").unwrap();
    std::fs::set_permissions(data.join("sub/file"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::set_permissions(data.join("sub"), std::fs::Permissions::from_mode(0o710)).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", data.join("link")).unwrap();
    std::fs::create_dir(data.join("d")).unwrap();
    std::fs::write(data.join("d/secret"), "decoy\n").unwrap();
    for i in 0..300 {
        std::fs::create_dir(data.join(format!("f{i}"))).unwrap();
    }
    // What the swapped-in symlink points to on the host.
    let host = b.path().join("host-secret");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("secret"), "HOST_SECRET\n").unwrap();
    std::os::unix::fs::symlink(&host, data.join("alt")).unwrap();
    if who == Who::User {
        b.chown();
    }
    let out = b.run(&format!("tc-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "-rw-r-----\ncontent\n/etc/hostname\ndrwx--x---\ndecoy\n",
        "{}",
        describe(&out)
    );
    if Command::new("python3").arg("-c").arg("").status().is_err() {
        skip!("SKIP: the race part of tmpcopyup_copies_without_following_swapped_symlinks: no python3");
        return;
    }
    // Exchange `d` and the symlink `alt` (renameat2 RENAME_EXCHANGE) while containers copy.
    // The racer says READY after its first exchange, stops when `stop` exists, and reports
    // how many exchanges succeeded (and the last errno): a race that never ran proves
    // nothing.
    let stop = b.path().join("stop");
    let racer = format!(
        "import os, ctypes\n\
         l = ctypes.CDLL(None, use_errno=True)\n\
         os.chdir({:?})\n\
         n, err = 0, 0\n\
         while not os.path.exists({:?}):\n\
         \x20   if l.renameat2(-100, b'd', -100, b'alt', 2) == 0:\n\
         \x20       n += 1\n\
         \x20       if n == 1: print('READY', flush=True)\n\
         \x20   else:\n\
         \x20       err = ctypes.get_errno()\n\
         \x20       if n == 0: break\n\
         print('SWAPS', n, 'ERRNO', err, flush=True)\n",
        data.display().to_string(),
        stop.display().to_string()
    );
    let mut racer = Command::new("python3")
        .arg("-c")
        .arg(racer)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut racer_out = std::io::BufReader::new(racer.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut racer_out, &mut first).unwrap();
    let mut leaked = Vec::new();
    if first.trim() == "READY" {
        for i in 0..60 {
            let out = b.run(&format!("tc-{who:?}-{i}"));
            if String::from_utf8_lossy(&out.stdout).contains("HOST_SECRET") {
                leaked.push(i);
            }
        }
    }
    std::fs::write(&stop, "").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut racer_out, &mut rest).unwrap();
    let _ = racer.wait();
    let report = format!("{first}{rest}");
    let swaps: u64 = report
        .lines()
        .find_map(|l| l.strip_prefix("SWAPS "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the racer did not report: {report:?}"));
    // 60 container starts take seconds; the racer exchanges thousands of times a second.
    println!("tmpcopyup race ({who:?}): {swaps} exchanges during 60 runs");
    assert!(swaps >= 1000, "the racer exchanged only {swaps} times: {report:?}");
    assert!(leaked.is_empty(), "runs {leaked:?} copied the host's file into the container");
});

// F6 of the OCI review: `nosymfollow` and any other unknown option of a bind mount were
// dropped without a word, and so were mounts[].uidMappings/gidMappings.
both!(fn bind_mount_options_are_honoured_or_refused(who) {
    let Some(b) = Bundle::new(who, &["sh", "-c", "grep ' /data ' /proc/self/mountinfo | cut -d' ' -f6; cat /data/link"], |_| {}) else { return };
    let host = b.path().join("hostdir");
    std::fs::create_dir(&host).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", host.join("link")).unwrap();
    let cfg_path = b.path().join("config.json");
    let base: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    let with_mount = |m: Value| {
        let mut cfg = base.clone();
        cfg["mounts"].as_array_mut().unwrap().push(m);
        std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
        if who == Who::User {
            b.chown();
        }
    };
    let src = host.display().to_string();
    with_mount(json!({"destination": "/data", "type": "bind", "source": src, "options": ["rbind", "nosymfollow"]}));
    let out = b.run(&format!("mo1-{who:?}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.split(',').any(|o| o.trim() == "nosymfollow"), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic links"), "{}", describe(&out));
    with_mount(json!({"destination": "/data", "type": "bind", "source": src, "options": ["rbind", "nosymlinks"]}));
    let out = b.run(&format!("mo2-{who:?}"));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"nosymlinks\""), "{}", describe(&out));
    // A superblock flag cannot be set by a bind (the kernel would ignore it): refused.
    with_mount(json!({"destination": "/data", "type": "bind", "source": src, "options": ["rbind", "lazytime"]}));
    let out = b.run(&format!("mo4-{who:?}"));
    assert!(!out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"lazytime\"") && err.contains("superblock"), "{}", describe(&out));
    with_mount(json!({"destination": "/data", "type": "bind", "source": src, "options": ["rbind"],
        "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 1000}],
        "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 1000}]}));
    let out = b.run(&format!("mo3-{who:?}"));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("uidMappings`"), "{}", describe(&out));
});

// F7 of the OCI review: `cordon-oci spec` wrote an inheritable set (CVE-2022-29162 class);
// runc's spec has none since.
both!(fn spec_writes_no_inheritable_capabilities(who) {
    let Some(b) = Bundle::new(who, &["sh", "-c", "grep CapInh /proc/self/status"], |c| {
        assert!(c["process"]["capabilities"].get("inheritable").is_none(), "{c}");
    }) else { return };
    let out = b.run(&format!("ci-{who:?}"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "CapInh:\t0000000000000000\n", "{}", describe(&out));
});

// linux.sysctl of the container's own namespaces is written below its procfs (not through a
// symlink or a mount on the way) and the program reads it back.
both!(fn sysctls_of_the_containers_namespaces_are_set(who) {
    let Some(b) = Bundle::new(
        who,
        &["cat", "/proc/sys/kernel/msgmax", "/proc/sys/net/ipv4/ping_group_range"],
        |c| {
            let ns = c["linux"]["namespaces"].as_array_mut().unwrap();
            for kind in ["network", "ipc"] {
                if !ns.iter().any(|n| n["type"] == kind) {
                    ns.push(json!({"type": kind}));
                }
            }
            c["linux"]["sysctl"] = json!({"kernel.msgmax": "12345", "net.ipv4.ping_group_range": "0 0"});
        },
    ) else { return };
    let out = b.run(&format!("sysctl-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "12345\n0\t0\n", "{}", describe(&out));
});

// F4 of the OCI review: net.* and IPC sysctls were written into a namespace joined by path
// even when that was the host's (cordon-oci's own); refused now, as runc refuses it.
both!(fn sysctls_of_the_hosts_namespaces_are_refused(who) {
    let before = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap();
    for (ns, key, value) in [("network", "net.core.somaxconn", "4097"), ("ipc", "kernel.shmmni", "4097")] {
        let Some(b) = Bundle::new(who, &["true"], |c| {
            let list = c["linux"]["namespaces"].as_array_mut().unwrap();
            list.retain(|n| n["type"] != ns);
            // cordon-oci's own namespace, whoever runs it.
            list.push(json!({"type": ns, "path": format!("/proc/self/ns/{}", if ns == "network" { "net" } else { ns })}));
            c["linux"]["sysctl"] = json!({key: value});
        }) else { return };
        let out = b.run(&format!("sy-{ns}-{who:?}"));
        assert!(!out.status.success(), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("linux.sysctl[{key}]")) && err.contains("host"), "{}", describe(&out));
    }
    assert_eq!(std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap(), before);
});

// The container's bounding set is exactly `process.capabilities.bounding`: every other
// capability the kernel has is dropped and the ones named stay. (cordon-oci drops by number,
// so a capability newer than the capability library would go too; every capability of this
// kernel has a name, so this checks the resulting set, not that part.)
both!(fn bounding_set_is_exactly_the_configured_one(who) {
    let Some(b) = Bundle::new(who, &["cat", "/proc/self/status"], |c| {
        let kept = json!(["CAP_CHOWN", "CAP_KILL"]);
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set] = kept.clone();
        }
        c["process"]["capabilities"]["inheritable"] = json!([]);
        c["process"]["capabilities"]["ambient"] = json!([]);
    }) else { return };
    let out = b.run(&format!("bnd-{who:?}"));
    assert!(out.status.success(), "{}", describe(&out));
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap_or_else(|| panic!("no {name} in:\n{status}"))
    };
    let want = (1u64 << 0) | (1u64 << 5); // CAP_CHOWN, CAP_KILL
    assert_eq!(field("CapBnd:"), want, "{}", describe(&out));
    assert_eq!(field("CapEff:"), want, "{}", describe(&out));
    assert_eq!(field("CapPrm:"), want, "{}", describe(&out));
    assert_eq!(field("CapInh:"), 0, "{}", describe(&out));
    assert_eq!(field("CapAmb:"), 0, "{}", describe(&out));
});

// A mount or uts namespace given by path that is cordon-oci's own is refused: init would
// pivot_root there (moving every process of that namespace into the container's root) or set
// its hostname. cordon-oci runs in private mount and uts namespaces here (unshare), so that
// even without the refusal only those would change, never the host's.
#[test]
fn own_mount_or_uts_namespace_is_refused() {
    if !running_as_root() {
        skip!("SKIP: own_mount_or_uts_namespace_is_refused: needs root (unshare)");
        return;
    }
    let unshare = ["unshare", "--mount", "--uts", "--propagation", "private"];
    let joining = |ty: &'static str, proc_name: &'static str, hostname: Option<&'static str>| {
        move |c: &mut Value| {
            let list = c["linux"]["namespaces"].as_array_mut().unwrap();
            list.retain(|n| n["type"] != ty);
            list.push(json!({"type": ty, "path": format!("/proc/self/ns/{proc_name}")}));
            match hostname {
                Some(h) => c["hostname"] = json!(h),
                None => {
                    c.as_object_mut().unwrap().remove("hostname");
                }
            }
        }
    };
    for (ty, proc_name, id) in [("mount", "mnt", "ownmnt"), ("uts", "uts", "ownuts")] {
        let Some(b) = Bundle::new(
            Who::Root,
            &["true"],
            joining(ty, proc_name, Some("renamed")),
        ) else {
            return;
        };
        let cfg: Value =
            serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
        let index = cfg["linux"]["namespaces"].as_array().unwrap().len() - 1;
        let out = b.oci_under(
            &unshare,
            &b.bundle_args("run", id)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert!(!out.status.success(), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("linux.namespaces[{index}].path"))
                && err.contains(&format!("cordon-oci's own {ty} namespace")),
            "{}",
            describe(&out)
        );
    }
    // Without a hostname, cordon-oci's own uts namespace is shared, as without the entry.
    let Some(b) = Bundle::new(Who::Root, &["hostname"], joining("uts", "uts", None)) else {
        return;
    };
    let out = b.oci_under(
        &unshare,
        &b.bundle_args("run", "shareuts")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{}", describe(&out));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), host.trim());
}

/// A --console-socket at `path`: takes the pty master cordon-oci sends and reads what the
/// container writes to its terminal until it ends (EIO) or 20 s pass.
fn console_socket(path: &Path) -> std::thread::JoinHandle<Result<String, String>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        let conn = loop {
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(format!("accept on the console socket: {e}")),
            }
        };
        conn.set_nonblocking(false).map_err(|e| e.to_string())?;
        let mut buf = [0u8; 256];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let msg = recvmsg::<()>(
            conn.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(|e| format!("recvmsg: {e}"))?;
        let mut master = None;
        for c in msg.cmsgs().map_err(|e| e.to_string())? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                for fd in fds {
                    let owned = cordon::sys::own_received_fd(fd);
                    master.get_or_insert(owned);
                }
            }
        }
        let master = master.ok_or("no descriptor on the console socket")?;
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        while Instant::now() < deadline {
            let mut fds = [nix::poll::PollFd::new(
                std::os::fd::AsFd::as_fd(&master),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u16)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {}
                Err(e) => return Err(format!("poll: {e}")),
            }
            match nix::unistd::read(&master, &mut chunk) {
                Ok(0) | Err(nix::errno::Errno::EIO) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("read the pty: {e}")),
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    })
}

// process.terminal: the console pty is also at /dev/console (the runtime spec's rule): the
// same device as the process's stdin, a pty (major 136).
// Item 7 of the second OCI review: the process's stdio (files and pipes of its caller, the
// console's pty) stayed root's, so a non-root process could not reopen /dev/stdout. Now, as
// runc's fixStdioPermissions, they are given to the process's uid. Root's container runs as
// uid 1000 (its stdout a root-owned file of the test, then the pty); the user's, uid 0 of its
// user namespace, cannot take the test's root-owned file (its owner is not mapped): skipped
// (EPERM), not an error.
both!(fn stdio_and_console_belong_to_the_process_user(who) {
    let script = "echo via-dev-stdout >/dev/stdout";
    let user = |c: &mut Value| {
        if who == Who::Root {
            c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        }
    };
    let first = if who == Who::Root { script } else { "echo plain" };
    let Some(b) = Bundle::new(who, &["sh", "-c", first], user) else { return };
    // stdout a pipe, as a shim's: given to the process's user.
    let args = b.bundle_args("run", &format!("stdio-{who:?}"));
    let out = b
        .command_under(&[], &args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let want = if who == Who::Root { "via-dev-stdout\n" } else { "plain\n" };
    assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{}", describe(&out));
    // stdout a file of the host (`run > /var/log/app.log`): never given to the container's
    // user, who then cannot reopen it, and it stays root's.
    if who == Who::Root {
        let out = b.run("stdio-file");
        assert!(!out.status.success(), "uid 1000 reopened a root-owned host file: {}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"), "{}", describe(&out));
        let _cleanup = Deleted(&b, "stdio-file".into());
    }
    let Some(b) = Bundle::new(who, &["sh", "-c", script], |c| {
        user(c);
        c["process"]["terminal"] = json!(true);
    }) else { return };
    let sock = b.path().join("console.sock");
    let reader = console_socket(&sock);
    let mut args = b.bundle_args("run", "stdio-tty");
    args.insert(1, "--console-socket".into());
    args.insert(2, sock.display().to_string());
    let out = b.oci(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let tty = reader.join().unwrap();
    assert!(out.status.success(), "{}\nterminal: {tty:?}", describe(&out));
    assert!(tty.unwrap().contains("via-dev-stdout"), "{}", describe(&out));
});

both!(fn the_terminal_is_bound_at_dev_console(who) {
    let Some(b) = Bundle::new(
        who,
        &["busybox", "stat", "-L", "-c", "%t:%T", "/dev/console", "/proc/self/fd/0"],
        |c| c["process"]["terminal"] = json!(true),
    ) else { return };
    let sock = b.path().join("console.sock");
    let reader = console_socket(&sock);
    let mut args = b.bundle_args("run", "con");
    args.insert(1, "--console-socket".into());
    args.insert(2, sock.display().to_string());
    let out = b.oci(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let tty = reader.join().unwrap();
    assert!(out.status.success(), "{}\nterminal: {tty:?}", describe(&out));
    let tty = tty.unwrap();
    let lines: Vec<&str> = tty.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{tty:?}");
    assert!(lines[0].starts_with("88:"), "/dev/console is no pty: {tty:?}");
    assert_eq!(lines[0], lines[1], "/dev/console is not the process's terminal: {tty:?}");
});

// The console pty is bound through /proc/self/fd, which is the kernel's only on a procfs: a
// config without a proc mount (the image's /proc a plain directory) is refused, not bound
// through whatever the image has there.
both!(fn the_console_needs_a_procfs(who) {
    let Some(b) = Bundle::new(who, &["true"], |c| {
        c["process"]["terminal"] = json!(true);
        c["mounts"].as_array_mut().unwrap().retain(|m| m["type"] != "proc");
        c["linux"]["maskedPaths"] = json!([]);
        c["linux"]["readonlyPaths"] = json!([]);
    }) else { return };
    let sock = b.path().join("console.sock");
    let _reader = console_socket(&sock);
    let mut args = b.bundle_args("run", "noproc");
    args.insert(1, "--console-socket".into());
    args.insert(2, sock.display().to_string());
    let out = b.oci(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let _cleanup = Deleted(&b, "noproc".into());
    assert!(!out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/console") && err.contains("not a procfs") && err.contains("mount proc"),
        "{}",
        describe(&out)
    );
});

// `kill` takes real-time signals by number and by name (podman stops a systemd container
// with SIGRTMIN+3), and refuses a number past SIGRTMAX.
both!(fn kill_sends_real_time_signals(who) {
    let Some(b) = Bundle::new(
        who,
        &["sh", "-c", "trap 'exit 3' 37; while :; do sleep 0.1; done"],
        |_| {},
    ) else { return };
    let id = format!("rt-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    b.run_detached(&id);
    b.wait_status(&id, "running");
    let out = b.oci(&["kill", &id, "65"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 to 64"), "{}", describe(&out));
    // Until the shell has its trap, pid 1 of the container ignores the signal: send again.
    let mut stopped = false;
    for sig in ["SIGRTMIN+3", "RTMIN+3", "37", "37", "37", "37", "37", "37", "37", "37"] {
        let out = b.oci(&["kill", &id, sig]);
        if !out.status.success() && b.state(&id)["status"] == "stopped" {
            stopped = true;
            break;
        }
        assert!(out.status.success(), "kill {sig}: {}", describe(&out));
        if b.wait_status(&id, "stopped")["status"] == "stopped" {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "the container's trap on signal 37 never ran");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// `exec` applies process.oomScoreAdj: the container's, or that of --process.
both!(fn exec_applies_oom_score_adj(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["process"]["oomScoreAdj"] = json!(300);
    }) else { return };
    let id = format!("oom-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    b.run_detached(&id);
    let out = b.oci(&["exec", &id, "cat", "/proc/self/oom_score_adj"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "300", "{}", describe(&out));
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let mut process = cfg["process"].clone();
    process["args"] = json!(["cat", "/proc/self/oom_score_adj"]);
    process["oomScoreAdj"] = json!(400);
    let p = b.process_file(who, &process);
    let out = b.oci(&["exec", "--process", p.to_str().unwrap(), &id]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "400", "{}", describe(&out));
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

/// The nice value and scheduling policy in /proc/PID/stat text (fields 19 and 41).
fn nice_and_policy(stat: &str) -> (i64, u32) {
    let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    (rest[16].parse().unwrap(), rest[38].parse().unwrap())
}

// process.ioPriority and process.scheduler (runtime spec 1.2) reach the container's process
// and an exec'd one (the container's, or those of --process); what only CAP_SYS_NICE of the
// host may ask fails a rootless container with the field named.
both!(fn io_priority_and_scheduler_are_applied(who) {
    let script = "ionice; cat /proc/self/stat; echo; exec sleep 60";
    let Some(b) = Bundle::new(who, &["sh", "-c", script], |c| {
        c["process"]["ioPriority"] = json!({"class": "IOPRIO_CLASS_BE", "priority": 6});
        c["process"]["scheduler"] = json!({"policy": "SCHED_BATCH", "nice": 5});
    }) else { return };
    let id = format!("sched-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    b.run_detached(&id);
    let out = b.oci(&["exec", &id, "sh", "-c", "ionice; cat /proc/self/stat"]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (ionice, stat) = text.split_once('\n').unwrap();
    assert_eq!(ionice, "best-effort: prio 6", "{}", describe(&out));
    assert_eq!(nice_and_policy(stat), (5, 3), "nice 5, SCHED_BATCH: {}", describe(&out));
    // A --process file's own: SCHED_IDLE, the idle I/O class.
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let mut process = cfg["process"].clone();
    process["args"] = json!(["sh", "-c", "ionice; cat /proc/self/stat"]);
    process["ioPriority"] = json!({"class": "IOPRIO_CLASS_IDLE", "priority": 0});
    process["scheduler"] = json!({"policy": "SCHED_IDLE"});
    let p = b.process_file(who, &process);
    let out = b.oci(&["exec", "--process", p.to_str().unwrap(), &id]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (ionice, stat) = text.split_once('\n').unwrap();
    assert_eq!(ionice, "idle", "{}", describe(&out));
    assert_eq!(nice_and_policy(stat).1, 5, "SCHED_IDLE: {}", describe(&out));
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
    if who == Who::User {
        // A real-time policy needs CAP_SYS_NICE of the host: refused, and said so.
        let Some(b) = Bundle::new(who, &["true"], |c| {
            c["process"]["scheduler"] = json!({"policy": "SCHED_FIFO", "priority": 1});
        }) else { return };
        let out = b.run("sched-rt");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("process.scheduler") && err.contains("CAP_SYS_NICE"),
            "{}",
            describe(&out)
        );
    }
});

// Root `--systemd-cgroup` with no systemd manager to ask (a host not booted with systemd, or a
// cgroup v1 one): the cgroup is made where systemd would put the unit, with a warning that
// says no systemd knows it (runc refuses the flag on a host without systemd).
#[test]
fn root_systemd_cgroup_without_a_manager_to_ask_warns() {
    let test = "root_systemd_cgroup_without_a_manager_to_ask_warns";
    let booted = Path::new("/run/systemd/system").is_dir();
    if !running_as_root() || (booted && cgroup_layout() != CgroupLayout::HybridOrV1) {
        skip!("SKIP: {test}: needs root on a host not booted with systemd, or a cgroup v1 one");
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
        c["linux"]["cgroupsPath"] = json!("cordontest.slice:cordon:sdw");
    }) else {
        return;
    };
    let id = "sdw";
    // The slice is left, as runc leaves a cgroupsPath's parents: the test removes its own,
    // after the container (dropped in reverse order).
    struct SliceRemoved;
    impl Drop for SliceRemoved {
        fn drop(&mut self) {
            for h in std::fs::read_dir("/sys/fs/cgroup")
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = std::fs::remove_dir(h.path().join("cordontest.slice"));
            }
            let _ = std::fs::remove_dir("/sys/fs/cgroup/cordontest.slice");
        }
    }
    let _slice = SliceRemoved;
    let _cleanup = Deleted(&b, id.into());
    let bundle = b.path().display().to_string();
    let out = b.oci(&["--systemd-cgroup", "create", "--bundle", &bundle, id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && err.contains("warning: --systemd-cgroup")
            && err.contains("unknown to systemd"),
        "{}",
        describe(&out)
    );
    let pid = b.state(id)["pid"].as_i64().unwrap();
    let want = "/cordontest.slice/cordon-sdw.scope";
    let got = match cgroup_layout() {
        CgroupLayout::HybridOrV1 => v1_cgroup_of(pid, "memory"),
        _ => format!(
            "/{}",
            v2_cgroup_of(pid)
                .strip_prefix("/sys/fs/cgroup")
                .unwrap()
                .display()
        ),
    };
    assert_eq!(got, want, "{}", describe(&out));
    let out = b.oci(&["delete", "--force", id]);
    assert!(out.status.success(), "{}", describe(&out));
}

// A created container's init, waiting for `start`, ends on a `kill` with a signal that ends a
// process (SIGTERM: containerd's and Kubernetes' stop), as with runc, though it is its pid
// namespace's init, which is sent only the signals it handles. Its program never runs.
both!(fn a_created_container_ends_on_sigterm(who) {
    // The subreaper that reaps the created container's init (REAP_AFTER_SIGNAL).
    if !Path::new(REAPER).exists() {
        skip_unless_required!(
            "SKIP: a_created_container_ends_on_sigterm: needs {REAPER} (apt-get install python3)"
        );
        return;
    }
    let marker = common::shared_tempdir();
    let ran = marker.path().join("ran");
    let script = format!("touch {}", ran.display());
    let Some(b) = Bundle::new(who, &["sh", "-c", &script], |c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        mounts.push(json!({"destination": marker.path(), "type": "bind", "source": marker.path(), "options": ["rbind"]}));
    }) else { return };
    // Through `kill`, as a shim's stop sends it.
    let id = format!("term-kill-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    b.create(&id);
    assert_eq!(b.state(&id)["status"], "created");
    let out = b.oci(&["kill", &id, "TERM"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(b.wait_status(&id, "stopped")["status"], "stopped", "SIGTERM to a created container");
    let out = b.oci(&["delete", &id]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!ran.exists(), "the program ran after SIGTERM");
    // The status the caller of `create` reaps (as a subreaper, as conmon and the shims
    // are): 128+signal, for each of the four signals.
    for (name, num) in [("TERM", 15), ("INT", 2), ("HUP", 1), ("QUIT", 3)] {
        let id = format!("term-{name}-{who:?}");
        let _cleanup = Deleted(&b, id.clone());
        let pid_file = b.path().join(format!("{id}.pid"));
        let (sig, pid_file_arg) = (num.to_string(), pid_file.display().to_string());
        let prefix = [REAPER, "-c", REAP_AFTER_SIGNAL, &sig, &pid_file_arg];
        let mut args = b.bundle_args("create", &id);
        args.extend(["--pid-file".to_string(), pid_file_arg.clone()]);
        let out = b.oci_under(&prefix, &args.iter().map(String::as_str).collect::<Vec<_>>());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "create, SIG{name}, reap: {}", describe(&out));
        assert!(
            text.lines().any(|l| l == format!("exited {}", 128 + num)),
            "the created container's init after SIG{name}: want `exited {}`: {}",
            128 + num,
            describe(&out)
        );
        assert_eq!(b.state(&id)["status"], "stopped");
        assert!(!ran.exists(), "the program ran after SIG{name}");
    }
});

/// The interpreter that runs [`REAP_AFTER_SIGNAL`].
const REAPER: &str = "/usr/bin/python3";

/// Runs the command after its two arguments (SIGNAL PIDFILE) as a subreaper, sends SIGNAL
/// to the pid the command wrote to PIDFILE (the created container's init, now a child of
/// this process), reaps it and prints `exited CODE` or `killed SIGNAL`.
const REAP_AFTER_SIGNAL: &str = r#"
import ctypes, os, subprocess, sys
if ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
sig, pid_file = int(sys.argv[1]), sys.argv[2]
r = subprocess.run(sys.argv[3:])
if r.returncode != 0:
    sys.exit(r.returncode)
pid = int(open(pid_file).read())
os.kill(pid, sig)
_, st = os.waitpid(pid, 0)
if os.WIFEXITED(st):
    print("exited", os.WEXITSTATUS(st), flush=True)
else:
    print("killed", os.WTERMSIG(st), flush=True)
"#;

// process.apparmorProfile (containerd's CRI plugin and root podman give every container one
// on a host with AppArmor): the process runs confined by it, in `run` and in `exec` alike,
// and a profile that cannot be entered fails the container. Where AppArmor is off, a profile
// is an error naming the field, never dropped, and `unconfined` runs. (AppArmor is on in the
// cgroup v2 guest of scripts/vm-test, off on the host of .ci/run.)
both!(fn an_apparmor_profile_confines_the_process_or_is_refused(who) {
    let test = "an_apparmor_profile_confines_the_process_or_is_refused";
    let enabled = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y");
    let with_profile = |profile: &str, args: &[&str]| {
        Bundle::new(who, args, |c| c["process"]["apparmorProfile"] = json!(profile))
    };
    if !enabled {
        let Some(b) = with_profile("cordon-oci-test", &["true"]) else { return };
        let out = b.run(&format!("aa-off-{who:?}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains("process.apparmorProfile")
                && err.contains("cordon-oci-test")
                && err.contains("not enabled"),
            "{}",
            describe(&out)
        );
        let Some(b) = with_profile("unconfined", &["sh", "-c", "echo ran"]) else { return };
        let out = b.run(&format!("aa-unconf-{who:?}"));
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n", "{}", describe(&out));
        return;
    }
    // A profile that is not loaded cannot be entered: the container fails, it never runs
    // unconfined.
    let Some(b) = with_profile("cordon-oci-no-such-profile", &["sh", "-c", "echo ran"]) else { return };
    let out = b.run(&format!("aa-none-{who:?}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("apply process.apparmorProfile")
            && !String::from_utf8_lossy(&out.stdout).contains("ran"),
        "{}",
        describe(&out)
    );
    if !running_as_root() {
        skip!("SKIP: {test}: loading a profile takes root; the rest runs in a root test run");
        return;
    }
    let parser = Path::new("/usr/sbin/apparmor_parser");
    if !parser.exists() || !Path::new("/sys/kernel/security/apparmor").exists() {
        skip_unless_required!(
            "SKIP: {test}: AppArmor is on but profiles cannot be loaded here (apt-get install apparmor; mount -t securityfs securityfs /sys/kernel/security)"
        );
        return;
    }
    // Loaded by the test (root); entered by the variant's cordon-oci, the test user's too.
    let name = format!("cordon-oci-test-{who:?}-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile");
    std::fs::write(
        &profile,
        format!(
            "profile {name} flags=(attach_disconnected,mediate_deleted) {{\n  file,\n  capability,\n  \
             network,\n  signal,\n  unix,\n  ptrace,\n  mount,\n  umount,\n  pivot_root,\n  \
             deny /denied r,\n}}\n"
        ),
    )
    .unwrap();
    let load = Command::new(parser).args(["-r", "-K"]).arg(&profile).output().unwrap();
    assert!(load.status.success(), "apparmor_parser: {}", describe(&load));
    struct Unload<'a>(&'a Path, &'a Path);
    impl Drop for Unload<'_> {
        fn drop(&mut self) {
            let _ = Command::new(self.0).arg("-R").arg(self.1).output();
        }
    }
    let _unload = Unload(parser, &profile);
    let script = "cat /proc/self/attr/apparmor/current 2>/dev/null || cat /proc/self/attr/current; \
                  cat /denied && echo READ; sleep 60";
    let Some(b) = with_profile(&name, &["sh", "-c", script]) else { return };
    std::fs::write(b.path().join("rootfs/denied"), "secret\n").unwrap();
    let id = format!("aa-on-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    b.run_detached(&id);
    let out = b.oci(&["exec", &id, "sh", "-c", "cat /proc/self/attr/apparmor/current 2>/dev/null || cat /proc/self/attr/current; cat /denied && echo READ"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{name} (enforce)")) && !stdout.contains("READ") && !stdout.contains("secret"),
        "exec: {}",
        describe(&out)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"), "{}", describe(&out));
    // An exec --process file without a profile keeps the container's, as runc keeps it.
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let mut process = cfg["process"].clone();
    process.as_object_mut().unwrap().remove("apparmorProfile");
    process["args"] = json!(["cat", "/proc/self/attr/current"]);
    let p = b.path().join("process.json");
    std::fs::write(&p, serde_json::to_vec(&process).unwrap()).unwrap();
    let out = b.oci(&["exec", "--process", p.to_str().unwrap(), &id]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{name} (enforce)"),
        "exec --process: {}",
        describe(&out)
    );
    let pid = b.state(&id)["pid"].as_i64().unwrap();
    let current = std::fs::read_to_string(format!("/proc/{pid}/attr/current")).unwrap();
    assert_eq!(current.trim(), format!("{name} (enforce)"), "the container's init");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// `exec --process` holds the file to the container's runtime spec version (a field a newer
// spec added is refused, named, not dropped), and says which file an error is in: a stored
// config this cordon-oci refuses (one an older cordon-oci created the container with) is
// named as that, with what to do, not as the --process file's or a config.json's.
both!(fn exec_names_the_file_its_error_is_in(who) {
    let Some(b) = Bundle::new(who, &["sleep", "60"], |c| {
        c["ociVersion"] = json!("1.3.0");
    }) else { return };
    let id = format!("exf-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    b.run_detached(&id);
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
    let mut process = cfg["process"].clone();
    process["args"] = json!(["echo", "exec-ran"]);
    let p = b.path().join("process.json");
    let write_process = |process: &Value| {
        std::fs::write(&p, serde_json::to_vec(process).unwrap()).unwrap();
        if who == Who::User {
            b.chown();
        }
    };
    write_process(&process);
    let out = b.oci(&["exec", "--process", p.to_str().unwrap(), &id]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "exec-ran\n", "{}", describe(&out));
    process["futureFlag"] = json!(true);
    write_process(&process);
    let out = b.oci(&["exec", "--process", p.to_str().unwrap(), &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(&format!("--process {}", p.display()))
            && err.contains("`process.futureFlag`")
            && err.contains("1.3.0"),
        "{}",
        describe(&out)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("exec-ran"), "{}", describe(&out));
    // The stored config as an older cordon-oci could have kept it: a duplicate rlimit,
    // which this one refuses. A --process file replaces that process: it runs.
    let stored = b.state_root().join(&id).join("config.json");
    let mut kept: Value = serde_json::from_slice(&std::fs::read(&stored).unwrap()).unwrap();
    kept["process"]["rlimits"] = json!([
        {"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 1024},
        {"type": "RLIMIT_NOFILE", "soft": 512, "hard": 512}
    ]);
    std::fs::write(&stored, serde_json::to_vec(&kept).unwrap()).unwrap();
    process.as_object_mut().unwrap().remove("futureFlag");
    write_process(&process);
    let by_file = ["exec", "--process", p.to_str().unwrap(), &id];
    let out = b.oci(&by_file);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "exec-ran\n", "{}", describe(&out));
    let refused = |out: &Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains(&format!("container {id}'s config, as create stored it"))
                && err.contains(what)
                && err.contains("create it again")
                && !err.contains("config.json:")
                && !err.contains("--process"),
            "{}",
            describe(out)
        );
    };
    refused(&b.oci(&["exec", &id, "echo", "exec-ran"]), "RLIMIT_NOFILE");
    // A field outside the process: refused for both.
    kept["hooks"] = json!({"poststop": [{"path": "relative/hook"}]});
    std::fs::write(&stored, serde_json::to_vec(&kept).unwrap()).unwrap();
    refused(&b.oci(&by_file), "hooks.poststop[0].path");
    refused(&b.oci(&["exec", &id, "echo", "exec-ran"]), "hooks.poststop[0].path");
    let out = b.oci(&["delete", "--force", &id]);
    assert!(out.status.success(), "{}", describe(&out));
});

// A foreground `run` passes a signal it gets on to the container's process, then ends with
// that process's status and removes the container (as runc does).
both!(fn run_forwards_signals_to_the_container(who) {
    let Some(b) = Bundle::new(
        who,
        &["sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done"],
        |_| {},
    ) else { return };
    let id = format!("fwd-{who:?}");
    let _cleanup = Deleted(&b, id.clone());
    let args = b.bundle_args("run", &id);
    let err_dir = tempfile::tempdir().unwrap();
    let err_path = err_dir.path().join("err");
    let mut child = b
        .command(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let _run = KilledOnDrop(nix::unistd::Pid::from_raw(child.id() as i32));
    // The state exists once run has created the container.
    wait_until("run did not start the container", || {
        if let Some(st) = child.try_wait().unwrap() {
            let err = std::fs::read_to_string(&err_path).unwrap_or_default();
            panic!("run ended before the test signalled it: {st}, stderr: {err}");
        }
        let out = b.oci(&["state", &id]);
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (s["status"] == "running").then_some(())
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Until the shell has its trap, pid 1 of the container ignores SIGTERM: send again.
    let mut status = None;
    for _ in 0..50 {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            if let Some(s) = child.try_wait().unwrap() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if status.is_some() {
            break;
        }
    }
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let _ = b.oci(&["delete", "--force", &id]);
        panic!("run did not end after SIGTERM");
    };
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let left = b.oci(&["state", &id]);
    if left.status.success() {
        let _ = b.oci(&["delete", "--force", &id]);
    }
    assert_eq!(status.code(), Some(7), "run: {status}, stderr: {err}");
    assert!(!left.status.success(), "the container outlived run: {}", describe(&left));
});

// `update` on cgroup v1: memory and memory+swap raised or lowered together whatever the order
// the kernel needs; an update the kernel refuses says so for the update; a cpuset update of a
// container created without cpus works.
#[test]
fn update_on_cgroup_v1() {
    if !running_as_root() || cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: update_on_cgroup_v1: needs root on a cgroup v1 host");
        return;
    }
    if !Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists() {
        skip!("SKIP: update_on_cgroup_v1: no swap accounting (memory.memsw.*)");
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
        c["linux"]["resources"] = json!({"memory": {"limit": 104857600, "swap": 104857600}});
    }) else {
        return;
    };
    let _cleanup = Deleted(&b, "upd1".into());
    let pid = b.create("upd1");
    let read = v1_file_of(pid, "memory");
    for v in ["209715200", "52428800"] {
        let out = b.oci(&["update", "--memory", v, "--memory-swap", v, "upd1"]);
        assert!(out.status.success(), "update to {v}: {}", describe(&out));
        assert_eq!(read("memory.limit_in_bytes"), v);
        assert_eq!(read("memory.memsw.limit_in_bytes"), v);
    }
    let out = b.oci(&["update", "--memory", "209715200", "upd1"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot update container upd1")
            && err.contains("--memory-swap")
            && !err.contains("config.json"),
        "{}",
        describe(&out)
    );
    // Every container has a cpuset cgroup of its own (seeded from its parent's), as with
    // runc: `podman update --cpuset-cpus` of one created without cpus works.
    let cpuset = v1_cgroup_of(pid, "cpuset");
    assert_ne!(
        cpuset, "/",
        "the container is in a cpuset cgroup of its own"
    );
    let out = b.oci(&["update", "--cpuset-cpus", "0", "upd1"]);
    assert!(out.status.success(), "{}", describe(&out));
    let cpus =
        std::fs::read_to_string(format!("/sys/fs/cgroup/cpuset{cpuset}/cpuset.cpus")).unwrap();
    assert_eq!(cpus.trim(), "0");
    let out = b.oci(&["delete", "--force", "upd1"]);
    assert!(out.status.success(), "{}", describe(&out));
}

/// For the tests of systemd's named hierarchy: root on a cgroup v1 or hybrid host that mounts
/// it at /sys/fs/cgroup/systemd. Says SKIP and why otherwise.
fn named_systemd_ready(test: &str) -> bool {
    if !running_as_root() || cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: {test}: needs root on a cgroup v1 host");
        return false;
    }
    if !Path::new("/sys/fs/cgroup/systemd/cgroup.procs").exists() {
        skip!("SKIP: {test}: this host mounts no name=systemd hierarchy at /sys/fs/cgroup/systemd");
        return false;
    }
    true
}

// On a v1 or hybrid host the container also gets a cgroup of its own in systemd's named
// hierarchy, as with runc. Left at its caller's place (conmon sits at that hierarchy's root),
// it saw the host's whole tree there, and a systemd inside (podman `--systemd always` binds
// the hierarchy writable) made its units at the host's root.
#[test]
fn the_named_systemd_hierarchy_holds_the_container_in_a_cgroup_of_its_own() {
    let test = "the_named_systemd_hierarchy_holds_the_container_in_a_cgroup_of_its_own";
    if !named_systemd_ready(test) {
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |_| {}) else {
        return;
    };
    let _cleanup = Deleted(&b, "named1".into());
    let pid = b.create("named1");
    let named = v1_cgroup_of(pid, "name=systemd");
    assert_ne!(
        named, "/",
        "the container is in a name=systemd cgroup of its own"
    );
    assert_eq!(
        named,
        v1_cgroup_of(pid, "memory"),
        "at the same place as in the others"
    );
    let dir = PathBuf::from("/sys/fs/cgroup/systemd").join(named.trim_start_matches('/'));
    assert_eq!(read_trim(&dir.join("cgroup.procs")), pid.to_string());
    // Inside, /sys/fs/cgroup/systemd is that cgroup (its init is 1 there), read-only.
    let out = b.oci(&[
        "exec",
        "named1",
        "sh",
        "-c",
        "cat /sys/fs/cgroup/systemd/cgroup.procs; mkdir /sys/fs/cgroup/systemd/x",
    ]);
    assert!(!out.status.success(), "{}", describe(&out));
    let procs = String::from_utf8_lossy(&out.stdout);
    assert_eq!(procs.lines().next(), Some("1"), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Read-only"),
        "{}",
        describe(&out)
    );
    let out = b.oci(&["delete", "--force", "named1"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !dir.exists(),
        "{} is removed with the container",
        dir.display()
    );
}

// A name=systemd hierarchy cordon-oci cannot write (here: remounted read-only in the mount
// namespace it runs in) leaves the container in its caller's cgroup there, as runc does, with
// a debug line saying so; the controllers' cgroups and limits are unchanged.
#[test]
fn an_unwritable_named_systemd_hierarchy_is_left_out() {
    let test = "an_unwritable_named_systemd_hierarchy_is_left_out";
    if !named_systemd_ready(test) {
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
        c["linux"]["resources"] = json!({"memory": {"limit": 64 << 20}});
    }) else {
        return;
    };
    let id = "named-ro";
    let _cleanup = Deleted(&b, id.into());
    let log = b.path().join("debug.log");
    let prefix = [
        "unshare",
        "--mount",
        "sh",
        "-c",
        "mount -o remount,bind,ro /sys/fs/cgroup/systemd && exec \"$@\"",
        "sh",
    ];
    let mut args = vec![
        "--debug".to_string(),
        "--log".into(),
        log.display().to_string(),
    ];
    args.extend(b.bundle_args("create", id));
    let out = b.oci_under(
        &prefix,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{}", describe(&out));
    let pid = b.state(id)["pid"].as_i64().unwrap();
    let me = i64::from(std::process::id());
    assert_eq!(
        v1_cgroup_of(pid, "name=systemd"),
        v1_cgroup_of(me, "name=systemd"),
        "left in its caller's name=systemd cgroup"
    );
    let memory = v1_cgroup_of(pid, "memory");
    assert_ne!(
        memory,
        v1_cgroup_of(me, "memory"),
        "a memory cgroup of its own"
    );
    let limit = PathBuf::from("/sys/fs/cgroup/memory")
        .join(memory.trim_start_matches('/'))
        .join("memory.limit_in_bytes");
    assert_eq!(read_trim(&limit), (64u64 << 20).to_string());
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains("name=systemd") && logged.contains("left out"),
        "no debug line: {logged}"
    );
}

// A blockIO that asks for nothing (podman sends `{}` after dropping a weight the kernel
// cannot take; a weight of 0 is none) needs no cgroup: an unprivileged caller, who gets
// none on cgroup v1, runs the container (it was refused as a limit that needs one).
both!(fn an_empty_block_io_needs_no_cgroup(who) {
    for (n, block_io) in [json!({}), json!({"weight": 0, "throttleReadBpsDevice": []})].into_iter().enumerate() {
        let Some(b) = Bundle::new(who, &["sh", "-c", "echo ran"], |c| {
            c["linux"]["resources"] = json!({"blockIO": block_io.clone()});
        }) else { return };
        let out = b.run(&format!("bio0-{n}-{who:?}"));
        assert!(out.status.success(), "{block_io}: {}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n", "{}", describe(&out));
    }
});

// A memory limit too small for the container's init to start (`ctr run --memory-limit 1`)
// gets the OOM killer named, not "failed to exit before joining its cgroup".
#[test]
fn a_memory_limit_too_small_to_start_says_so() {
    if !running_as_root() {
        skip!("SKIP: a_memory_limit_too_small_to_start_says_so: needs root (a memory cgroup)");
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["true"], |c| {
        c["linux"]["resources"] = json!({"memory": {"limit": 1}});
    }) else {
        return;
    };
    let out = b.run("oom-start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("OOM killer")
            && err.contains("linux.resources.memory.limit"),
        "{}",
        describe(&out)
    );
}

/// Runs `mount ARGS...` on the host; panics with its output on failure.
fn host_mount(args: &[&str]) {
    let out = Command::new("mount").args(args).output().unwrap();
    assert!(out.status.success(), "mount {args:?}: {}", describe(&out));
}

// linux.rootfsPropagation: by default the root is a slave of the host's mount, as with runc
// (a mount the host makes below the rootfs after start, a volume's, reaches the container;
// none goes back); `rprivate` cuts it off. The rootfs is made a shared mount of its own for
// the test, as podman's overlay roots are.
#[test]
fn the_root_receives_host_mounts_unless_private() {
    if !running_as_root() {
        skip!(
            "SKIP: the_root_receives_host_mounts_unless_private: needs root (mounts on the host)"
        );
        return;
    }
    for (prop, seen) in [
        (None, true),
        (Some("rslave"), true),
        (Some("rprivate"), false),
        (Some("private"), false),
    ] {
        let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
            if let Some(p) = prop {
                c["linux"]["rootfsPropagation"] = json!(p);
            }
        }) else {
            return;
        };
        let rootfs = b.path().join("rootfs");
        let sub = rootfs.join("mnt/x");
        std::fs::create_dir_all(&sub).unwrap();
        let (r, s) = (rootfs.to_str().unwrap(), sub.to_str().unwrap());
        host_mount(&["--bind", r, r]);
        host_mount(&["--make-shared", r]);
        struct Unmount(String);
        impl Drop for Unmount {
            fn drop(&mut self) {
                let _ = Command::new("umount").args(["-R", &self.0]).status();
            }
        }
        let _u = Unmount(r.to_string());
        let id = format!("prop-{}", prop.unwrap_or("default"));
        let _d = Deleted(&b, id.clone());
        b.create(&id);
        let out = b.oci(&["start", &id]);
        assert!(out.status.success(), "{}", describe(&out));
        host_mount(&["-t", "tmpfs", "tmpfs", s]);
        let out = b.oci(&["exec", &id, "cat", "/proc/self/mountinfo"]);
        assert!(out.status.success(), "{}", describe(&out));
        let info = String::from_utf8_lossy(&out.stdout);
        let root = info
            .lines()
            .find(|l| l.split(' ').nth(4) == Some("/"))
            .unwrap_or("");
        let got = info.lines().any(|l| l.split(' ').nth(4) == Some("/mnt/x"));
        assert_eq!(
            got, seen,
            "{prop:?}: the host's mount below the rootfs: {info}"
        );
        assert_eq!(root.contains("master:"), seen, "{prop:?}: the root: {root}");
        assert!(
            !root.contains("shared:"),
            "{prop:?}: the root is shared: {root}"
        );
        // And nothing of the container's (its /proc, /dev...) shows on the host below the
        // rootfs: only the test's own two mounts.
        let host = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let below: Vec<&str> = host
            .lines()
            .filter(|l| {
                l.split(' ')
                    .nth(4)
                    .is_some_and(|m| m.starts_with(&format!("{r}/")))
            })
            .collect();
        assert!(
            below.iter().all(|l| l.split(' ').nth(4) == Some(s)),
            "{prop:?}: the container's mounts leaked to the host: {below:#?}"
        );
    }
}

// On a hybrid host whose hugetlb controller is only in the unified hierarchy (no v1 hugetlb
// mount, as on this kind of machine), a container with huge page limits gets a cgroup there
// too: its init is in it, the limit is written, `update -r` changes it, an exec'd process
// joins it, delete removes it. A container without such limits stays out of it (a move into
// a v2 cgroup costs an RCU grace period). Kubernetes sends hugepageLimits for every pod.
#[test]
fn hugepage_limits_on_a_hybrid_host_use_its_unified_hierarchy() {
    let unified = Path::new("/sys/fs/cgroup/unified");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let v1_hugetlb = mountinfo
        .lines()
        .any(|l| l.contains(" - cgroup ") && l.split(',').any(|o| o.trim() == "hugetlb"));
    let has = std::fs::read_to_string(unified.join("cgroup.controllers")).unwrap_or_default();
    if !running_as_root()
        || cgroup_layout() != CgroupLayout::HybridOrV1
        || v1_hugetlb
        || !has.split_whitespace().any(|c| c == "hugetlb")
        || !Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB").exists()
    {
        skip!(
            "SKIP: hugepage_limits_on_a_hybrid_host_use_its_unified_hierarchy: needs root on a hybrid host whose hugetlb controller (2 MB pages) is in /sys/fs/cgroup/unified only"
        );
        return;
    }
    let unified_of = |pid: i64| -> PathBuf {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let p = text
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap()
            .to_string();
        unified.join(p.trim_start_matches('/'))
    };
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
        c["linux"]["resources"] =
            json!({"hugepageLimits": [{"pageSize": "2MB", "limit": 4194304}]});
    }) else {
        return;
    };
    let _cleanup = Deleted(&b, "huge1".into());
    let pid = b.create("huge1");
    let cg = unified_of(pid);
    assert_ne!(
        cg,
        unified_of(std::process::id() as i64),
        "the init is not in a unified cgroup of its own"
    );
    assert_eq!(read_trim(&cg.join("hugetlb.2MB.max")), "4194304");
    let out = b.update_resources(
        "huge1",
        r#"{"hugepageLimits": [{"pageSize": "2MB", "limit": 2097152}]}"#,
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(read_trim(&cg.join("hugetlb.2MB.max")), "2097152");
    // In the container's cgroup namespace its own unified cgroup reads `/`.
    let out = b.oci(&["exec", "huge1", "cat", "/proc/self/cgroup"]);
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l == "0::/"),
        "the exec'd process is not in the container's unified cgroup: {}",
        describe(&out)
    );
    let procs = read_trim(&cg.join("cgroup.procs"));
    assert_eq!(
        procs,
        pid.to_string(),
        "only the init is left in the container's unified cgroup"
    );
    let out = b.oci(&["delete", "--force", "huge1"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!cg.exists(), "{} outlived delete", cg.display());
    // Without huge page limits: not placed there.
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |_| {}) else {
        return;
    };
    let _cleanup = Deleted(&b, "huge2".into());
    let pid = b.create("huge2");
    assert_eq!(unified_of(pid), unified_of(std::process::id() as i64));
}

// cpu.burst and cpu.idle on cgroup v1, whose cpu controller has both (cpu.cfs_burst_us,
// Linux 5.14; cpu.idle, 5.15): written at create, and the burst again by `update`.
#[test]
fn cpu_burst_and_idle_on_cgroup_v1() {
    if !running_as_root() || cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: cpu_burst_and_idle_on_cgroup_v1: needs root on a cgroup v1 host");
        return;
    }
    if !Path::new("/sys/fs/cgroup/cpu/cpu.cfs_burst_us").exists()
        || !Path::new("/sys/fs/cgroup/cpu/cpu.idle").exists()
    {
        skip!(
            "SKIP: cpu_burst_and_idle_on_cgroup_v1: the kernel's v1 cpu controller lacks cpu.cfs_burst_us or cpu.idle (Linux 5.15)"
        );
        return;
    }
    let Some(b) = Bundle::new(Who::Root, &["sleep", "60"], |c| {
        c["linux"]["resources"] =
            json!({"cpu": {"quota": 50000, "period": 100000, "burst": 20000, "idle": 1}});
    }) else {
        return;
    };
    let _cleanup = Deleted(&b, "burst1".into());
    let pid = b.create("burst1");
    let read = v1_file_of(pid, "cpu");
    assert_eq!(read("cpu.cfs_quota_us"), "50000");
    assert_eq!(read("cpu.cfs_burst_us"), "20000");
    assert_eq!(read("cpu.idle"), "1");
    let out = b.update_resources("burst1", r#"{"cpu": {"burst": 10000, "idle": 0}}"#);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(read("cpu.cfs_burst_us"), "10000");
    assert_eq!(read("cpu.idle"), "0");
    // Both lowered below the current burst: the burst goes first (the kernel keeps it at or
    // below the quota at every write).
    let out = b.update_resources("burst1", r#"{"cpu": {"quota": 8000, "burst": 4000}}"#);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        (read("cpu.cfs_quota_us"), read("cpu.cfs_burst_us")),
        ("8000".into(), "4000".into())
    );
    // A burst above the quota is the kernel's to refuse, and the update says so.
    let out = b.update_resources("burst1", r#"{"cpu": {"burst": 60000}}"#);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cpu.cfs_burst_us"),
        "{}",
        describe(&out)
    );
    assert_eq!(read("cpu.cfs_burst_us"), "4000");
}

/// A reader of the files of `pid`'s cgroup in the v1 hierarchy of `controller`, trimmed.
fn v1_file_of(pid: i64, controller: &str) -> impl Fn(&str) -> String {
    let dir = Path::new("/sys/fs/cgroup")
        .join(controller)
        .join(v1_cgroup_of(pid, controller).trim_start_matches('/'));
    move |f| read_trim(&dir.join(f))
}

/// The cgroup of `pid` in the v1 hierarchy of `controller` (its /proc/PID/cgroup line).
fn v1_cgroup_of(pid: i64, controller: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap()
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, p) = (f.next()?, f.next()?, f.next()?);
            c.split(',').any(|x| x == controller).then(|| p.to_string())
        })
        .unwrap_or_else(|| panic!("process {pid} is in no {controller} hierarchy"))
}

/// The whole disk (major, minor) that holds `path`: its filesystem's device, or that
/// device's disk when it is a partition; `None` when the filesystem is on no block device
/// (tmpfs, overlay).
fn disk_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let sys = if sys.join("partition").exists() {
        sys.join("..")
    } else {
        sys
    };
    let text = std::fs::read_to_string(sys.join("dev")).ok()?;
    let (a, b) = text.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

// linux.resources.blockIO on cgroup v1: a read throttle on the disk that holds the bundle
// slows the container's direct reads of it, a weight lands in blkio.bfq.weight and
// `update --blkio-weight` changes it, and a device the host lacks, or a per-device weight on
// a disk whose scheduler is not BFQ, is an error saying so.
#[test]
fn block_io_limits_on_cgroup_v1() {
    if !running_as_root() || cgroup_layout() != CgroupLayout::HybridOrV1 {
        skip!("SKIP: block_io_limits_on_cgroup_v1: needs root on a cgroup v1 host");
        return;
    }
    let probe = Bundle::new(Who::Root, &["true"], |_| {});
    let Some(probe) = probe else { return };
    let Some((major, minor)) = disk_of(&probe.path().join("rootfs/bin/busybox")) else {
        skip!(
            "SKIP: block_io_limits_on_cgroup_v1: the test's temporary directory is on no block device (tmpfs?)"
        );
        return;
    };
    // A weight needs BFQ's (or, before Linux 5.0, CFQ's) weight file: asked only where a
    // cgroup of the blkio hierarchy has one (not its root, which never does).
    let has_weight = std::fs::read_dir("/sys/fs/cgroup/blkio")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            e.path().join("blkio.bfq.weight").exists() || e.path().join("blkio.weight").exists()
        });
    if !has_weight {
        eprintln!(
            "block_io_limits_on_cgroup_v1: no blkio weight file (BFQ not loaded): the weight is not tested"
        );
    }
    // 1 MiB read with O_DIRECT (past the page cache) at 256 KiB/s: about 4 s; unthrottled,
    // a few milliseconds.
    let rate = 262144u64;
    let Some(b) = Bundle::new(
        Who::Root,
        &[
            "sh",
            "-c",
            "/bin/busybox dd if=/bin/busybox of=/dev/null bs=65536 count=16 iflag=direct 2>&1; sleep 60",
        ],
        |c| {
            c["linux"]["resources"] = json!({"blockIO": {
                "throttleReadBpsDevice": [{"major": major, "minor": minor, "rate": rate}]
            }});
            if has_weight {
                c["linux"]["resources"]["blockIO"]["weight"] = json!(300);
            }
        },
    ) else {
        return;
    };
    let _cleanup = Deleted(&b, "blkio1".into());
    let pid = b.create("blkio1");
    let rel = v1_cgroup_of(pid, "blkio");
    let dir = PathBuf::from(format!("/sys/fs/cgroup/blkio{rel}"));
    assert_ne!(rel, "/", "the container has no blkio cgroup of its own");
    assert_eq!(
        read_trim(&dir.join("blkio.throttle.read_bps_device")),
        format!("{major}:{minor} {rate}")
    );
    let weight = |d: &Path| read_trim(&d.join("blkio.bfq.weight"));
    if dir.join("blkio.bfq.weight").exists() {
        assert!(
            weight(&dir).ends_with("300"),
            "blkio.bfq.weight: {}",
            weight(&dir)
        );
        let out = b.oci(&["update", "--blkio-weight", "700", "blkio1"]);
        assert!(out.status.success(), "update: {}", describe(&out));
        assert!(
            weight(&dir).ends_with("700"),
            "blkio.bfq.weight: {}",
            weight(&dir)
        );
    }
    let out = b.oci(&["update", "--blkio-weight", "5", "blkio1"]);
    assert!(
        !out.status.success(),
        "weight 5 was taken: {}",
        describe(&out)
    );
    let started = Instant::now();
    let out = b.oci(&["start", "blkio1"]);
    assert!(out.status.success(), "start: {}", describe(&out));
    // The container's own blkio counters see the read once dd is done.
    let read_bytes = || {
        std::fs::read_to_string(dir.join("blkio.throttle.io_service_bytes"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!("{major}:{minor} Read "))
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    let deadline = started + Duration::from_secs(30);
    while read_bytes() < 1 << 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    assert!(
        read_bytes() >= 1 << 20,
        "the container read {} bytes of {major}:{minor} directly",
        read_bytes()
    );
    // At 256 KiB/s, 1 MiB cannot be read in under 2 s (the throttle lets a first slice
    // through at once): a lower bound only, which a slow machine cannot break.
    assert!(
        took >= Duration::from_secs(2),
        "1 MiB was read in {took:?} under a 256 KiB/s throttle"
    );

    // A per-device weight needs BFQ on that disk: refused, saying how, where it is not.
    let scheduler =
        std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/queue/scheduler"))
            .unwrap_or_default();
    let mut refused = vec![
        (
            json!({"throttleReadBpsDevice": [{"major": 4095, "minor": 1048575, "rate": 1}]}),
            vec![
                "throttleReadBpsDevice[0]",
                "no whole block device of that major:minor",
            ],
        ),
        (
            json!({"leafWeight": 300}),
            vec!["leafWeight", "remove the field"],
        ),
    ];
    if dir.join("blkio.bfq.weight_device").exists() && !scheduler.contains("[bfq]") {
        refused.push((
            json!({"weightDevice": [{"major": major, "minor": minor, "weight": 300}]}),
            vec!["weightDevice[0].weight", "echo bfq >"],
        ));
    }
    for (asked, want) in refused {
        let Some(bad) = Bundle::new(Who::Root, &["true"], |c| {
            c["linux"]["resources"] = json!({"blockIO": asked.clone()});
        }) else {
            return;
        };
        let args = bad.bundle_args("create", "blkio2");
        let out = bad.oci(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let _ = bad.oci(&["delete", "--force", "blkio2"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains("linux.resources.blockIO")
                && want.iter().all(|w| err.contains(w)),
            "{asked}: {}",
            describe(&out)
        );
    }
}

// Errors name the field to fix: a bind source that does not exist (mounts[N].source), a
// filesystem option the kernel refuses (mounts[N].options), an id too long for a file name.
both!(fn mount_and_id_errors_name_what_to_fix(who) {
    for (id, mount, want) in [
        (
            "badsrc",
            json!({"destination": "/mnt", "type": "bind", "source": "/nonexistent-cordon-test", "options": ["rbind"]}),
            "source /nonexistent-cordon-test: it does not exist",
        ),
        (
            "badopt",
            json!({"destination": "/mnt", "type": "tmpfs", "source": "tmpfs", "options": ["foo=bar"]}),
            "options",
        ),
    ] {
        let Some(b) = Bundle::new(who, &["true"], |c| {
            c["mounts"].as_array_mut().unwrap().push(mount.clone());
        }) else { return };
        let cfg: Value =
            serde_json::from_slice(&std::fs::read(b.path().join("config.json")).unwrap()).unwrap();
        let index = cfg["mounts"].as_array().unwrap().len() - 1;
        let out = b.run(id);
        assert!(!out.status.success(), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("mounts[{index}]")) && err.contains(want), "{}", describe(&out));
    }
    let Some(b) = Bundle::new(who, &["true"], |_| {}) else { return };
    let out = b.run(&"a".repeat(300));
    assert!(!out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("300 bytes") && err.contains("at most 248"), "{}", describe(&out));
});

// A rootless caller without XDG_RUNTIME_DIR keeps its state below /tmp/cordon-UID. In the
// shared /tmp another user can make that name first: a symlink they re-point at will (to a
// state.json naming a poststop hook of theirs, which `delete` would run as the caller) or a
// directory of their own. cordon-oci refuses both, naming the path and the fixes, and makes
// the directory private itself when it is missing. Root plays the other user here; the
// caller is a uid of no account (nothing of the real test user's is touched).
#[test]
fn a_state_base_in_tmp_that_another_user_made_is_refused() {
    if !running_as_root() {
        skip!(
            "SKIP: a_state_base_in_tmp_that_another_user_made_is_refused: needs root to act as two users"
        );
        return;
    }
    let (caller, other) = (61_000 + std::process::id() % 1000, 62_999u32);
    let base = PathBuf::from(format!("/tmp/cordon-{caller}"));
    // Removed however the test ends.
    struct Clean(PathBuf);
    impl Drop for Clean {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _guard = Clean(base.clone());
    let clean = || {
        let _ = std::fs::remove_file(&base);
        let _ = std::fs::remove_dir_all(&base);
    };
    clean();
    let list = || {
        Command::new("setpriv")
            .args([
                "--reuid",
                &caller.to_string(),
                "--regid",
                &caller.to_string(),
                "--clear-groups",
            ])
            .args(["env", "-i", "PATH=/usr/bin:/bin"])
            .arg(oci_bin())
            .arg("list")
            .output()
            .unwrap()
    };
    let refused = |want: &str| {
        let out = list();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}", describe(&out));
        for w in [base.to_str().unwrap(), want, "XDG_RUNTIME_DIR", "--root"] {
            assert!(err.contains(w), "want {w:?}: {}", describe(&out));
        }
    };
    // Another user's symlink to a directory that would pass every check below it.
    let planted = tempfile::Builder::new()
        .prefix("cordon-test-planted.")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::create_dir(planted.path().join("cordon")).unwrap();
    for p in [planted.path().to_path_buf(), planted.path().join("cordon")] {
        std::os::unix::fs::chown(&p, Some(caller), Some(caller)).unwrap();
    }
    std::os::unix::fs::symlink(planted.path(), &base).unwrap();
    std::os::unix::fs::lchown(&base, Some(other), Some(other)).unwrap();
    refused(&format!("symlink of uid {other}"));
    clean();
    // Another user's directory.
    std::fs::create_dir(&base).unwrap();
    std::os::unix::fs::chown(&base, Some(other), Some(other)).unwrap();
    refused(&format!("belongs to uid {other}"));
    clean();
    // Missing: cordon-oci makes it, the caller's and private, and lists nothing.
    let out = list();
    assert!(out.status.success(), "{}", describe(&out));
    let md = std::fs::symlink_metadata(&base).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert!(
        md.is_dir() && md.uid() == caller && md.mode() & 0o777 == 0o700,
        "{md:?}"
    );
    clean();
}

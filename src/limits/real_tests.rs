//! Real cgroups on this host. They need root and a writable cgroup v1 memory/pids/cpu/cpuacct
//! setup (this VM's hybrid layout); otherwise they print `SKIP: <reason>` and pass.

use super::*;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

const MIB: u64 = 1 << 20;

/// The host, when these tests can run on it.
fn v1_host(test: &str) -> Option<HostPaths> {
    if !nix::unistd::geteuid().is_root() {
        println!("SKIP: {test}: needs root (cgroup v1 is not delegable)");
        return None;
    }
    let host = HostPaths::from_host().expect("read /proc/self/cgroup");
    let layout = Layout::discover(&RealFs, &host).expect("parse /proc/self/cgroup");
    if let Err(f) = v1::check(&RealFs, &layout, &host) {
        println!("SKIP: {test}: cgroup v1 unavailable here: {f}");
        return None;
    }
    Some(host)
}

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn run_id(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("test-{tag}-{nanos}")
}

/// Starts python, which waits for one byte on stdin before running `code`: the pid is attached
/// to the cgroup before anything measured happens.
fn run_attached(cg: &Cgroup, code: &str) -> Output {
    let mut child = Command::new(python())
        .arg("-c")
        .arg(format!("import sys\nsys.stdin.read(1)\n{code}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    cg.attach(child.id() as i32).expect("attach");
    child.stdin.take().unwrap().write_all(b"g").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn real_v1_memory_limit_oom_kills_and_reports_peak() {
    let Some(host) = v1_host("real_v1_memory_limit") else {
        return;
    };
    let limits = Limits {
        memory: Some(64 * MIB),
        pids: Some(64),
        cpus: Some(1.0),
        ..Limits::default()
    };
    let p = prepare_with(
        Arc::new(RealFs),
        &host,
        &limits,
        BackendChoice::CgroupV1,
        &run_id("oom"),
    )
    .unwrap();
    let cg = p.cgroup.expect("a v1 cgroup");
    let dirs = cg.dirs();
    let mem = &dirs[0];
    assert_eq!(
        std::fs::read_to_string(mem.join("memory.limit_in_bytes"))
            .unwrap()
            .trim(),
        "67108864"
    );

    // 200 MB, every page written.
    let out = run_attached(&cg, "b = b'x' * (200 << 20)\nprint(len(b))");
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{out:?}");
    let m = cg.metrics();
    assert_eq!(m.source, Some(MetricSource::CgroupV1));
    assert!(m.oom_kills.unwrap() >= 1, "{m:?}");
    let peak = m.peak_memory.unwrap();
    assert!(peak > 32 * MIB && peak <= 64 * MIB, "peak {peak}");
    assert!(m.cpu_time.unwrap() > Duration::ZERO, "{m:?}");

    cg.remove().unwrap();
    for d in &dirs {
        assert!(!d.exists(), "{} still exists", d.display());
    }
}

#[test]
fn real_v1_pids_limit_makes_fork_fail() {
    let Some(host) = v1_host("real_v1_pids_limit") else {
        return;
    };
    let limits = Limits {
        pids: Some(8),
        ..Limits::default()
    };
    let p = prepare_with(
        Arc::new(RealFs),
        &host,
        &limits,
        BackendChoice::CgroupV1,
        &run_id("pids"),
    )
    .unwrap();
    let cg = p.cgroup.expect("a v1 cgroup");
    // Each child closes its stdout/stderr so that waiting for the parent's output does not
    // wait for the children too.
    let code = r#"
import os, time
kids = []
err = None
for i in range(20):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        os.close(1)
        os.close(2)
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
print(len(kids), err)
"#;
    let out = run_attached(&cg, code);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // python itself is one of the 8 tasks.
    assert_eq!(stdout.trim(), format!("7 {}", libc::EAGAIN), "{out:?}");

    // The 7 sleeping children were reparented away from us; kill() finds them in the cgroup.
    let procs = dirs_procs(&cg);
    assert_eq!(procs.len(), 7, "{procs:?}");
    cg.kill();
    assert!(dirs_procs(&cg).is_empty());
    let dirs = cg.dirs();
    cg.remove().unwrap();
    assert!(dirs.iter().all(|d| !d.exists()));
}

fn dirs_procs(cg: &Cgroup) -> Vec<String> {
    let pids_dir = &cg.dirs()[1];
    std::fs::read_to_string(pids_dir.join("cgroup.procs"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn real_v1_cpu_quota_throttles() {
    let Some(host) = v1_host("real_v1_cpu_quota") else {
        return;
    };
    let limits = Limits {
        cpus: Some(0.2),
        ..Limits::default()
    };
    let p = prepare_with(
        Arc::new(RealFs),
        &host,
        &limits,
        BackendChoice::CgroupV1,
        &run_id("cpu"),
    )
    .unwrap();
    let cg = p.cgroup.expect("a v1 cgroup");
    let out = run_attached(
        &cg,
        "import time\nt = time.time() + 1.0\nwhile time.time() < t: pass\n",
    );
    assert!(out.status.success(), "{out:?}");
    let used = cg.metrics().cpu_time.unwrap();
    // 0.2 CPU for 1 s of wall time is ~200 ms; unthrottled it would be ~1000 ms.
    assert!(
        used > Duration::from_millis(50) && used < Duration::from_millis(450),
        "cpu {used:?}"
    );
    cg.remove().unwrap();
}

/// `cordon doctor` must predict what `--backend auto` does, on whatever host this runs.
#[test]
fn real_probe_predicts_auto() {
    let pr = probe();
    assert!(pr.error.is_none(), "{pr:?}");
    println!("{}", serde_json::to_string_pretty(&pr).unwrap());
    let mut p =
        prepare_deferred(&Limits::default(), BackendChoice::Auto, &run_id("probe")).unwrap();
    if let Some(cg) = p.cgroup.as_mut() {
        cg.create_pending().unwrap();
    }
    let got = match p.cgroup.as_ref().map(Cgroup::backend) {
        Some(Backend::CgroupV2) => "cgroup-v2",
        Some(Backend::CgroupV1) => "cgroup-v1",
        _ => "rlimit",
    };
    assert_eq!(
        pr.auto_backend,
        got,
        "probe {pr:#?}\nreport {}",
        p.report.backend_note.clone().unwrap_or_default()
    );
    if let Some(cg) = p.cgroup {
        cg.remove().unwrap();
    }
}

/// Set in the re-executed, unprivileged copy of this test binary.
const UNPRIV_ENV: &str = "CORDON_LIMITS_TEST_UNPRIVILEGED";

#[test]
fn real_unprivileged_gets_rlimit_fallback_with_reason() {
    let name = "limits::real_tests::real_unprivileged_gets_rlimit_fallback_with_reason";
    if std::env::var_os(UNPRIV_ENV).is_some() {
        return unprivileged_inner();
    }
    if v1_host("real_unprivileged_fallback").is_none() {
        return;
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        println!("SKIP: real_unprivileged_fallback: /usr/bin/setpriv is missing");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            &format!("{UNPRIV_ENV}=1"),
        ])
        .arg(&exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("Permission denied") {
        println!(
            "SKIP: real_unprivileged_fallback: uid 65534 cannot execute {}",
            exe.display()
        );
        return;
    }
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("UNPRIVILEGED-OK"), "{stdout}");
    println!("{stdout}");
}

fn unprivileged_inner() {
    let uid = nix::unistd::geteuid().as_raw();
    assert_ne!(uid, 0, "the unprivileged copy runs as root");
    let limits = Limits::default();
    let p = prepare_deferred(&limits, BackendChoice::Auto, &run_id("unpriv")).unwrap();
    assert!(
        p.cgroup.is_none(),
        "{}",
        p.report.backend_note.clone().unwrap_or_default()
    );
    let b = &p.report.backend_note.clone().unwrap_or_default();
    assert!(b.starts_with("rlimit (cgroup v2 "), "{b}");
    assert!(
        b.contains(&format!(
            "cgroup v1 not writable by uid {uid}: write to /sys/fs/cgroup/"
        )),
        "{b}"
    );
    assert!(b.contains("EACCES"), "{b}");
    assert_eq!(
        p.report.cpus.as_ref().unwrap().enforcement,
        Enforcement::Affinity
    );
    assert!(p.cpu_pin.as_ref().is_some_and(|c| !c.is_empty()));
    assert!(p.rlimits.iter().any(|r| r.resource == libc::RLIMIT_DATA));
    let err = prepare_deferred(&limits, BackendChoice::CgroupV1, &run_id("unpriv"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cgroup-v1") && err.contains("EACCES") && err.contains("run as root"),
        "{err}"
    );
    let probe = probe();
    assert_eq!(probe.auto_backend, "rlimit");
    println!("UNPRIVILEGED-OK backend: {b}\nforced v1: {err}");
}

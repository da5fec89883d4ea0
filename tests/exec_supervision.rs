//! Supervision: nothing of a sandbox outlives the run — not after a timeout, not after the main
//! process exits, not after cordon itself is SIGKILLed. Processes are found from the host by a
//! unique `sleep <marker>` argument (see `common::procs_matching`).

#[macro_use]
mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Waits (up to 10 s) for the marker process to appear, so a test cannot pass vacuously.
fn wait_for_marker(marker: &str, child: &mut std::process::Child) {
    let seen = wait_until(Duration::from_secs(10), || {
        !procs_matching(marker).is_empty() || child.try_wait().ok().flatten().is_some()
    });
    if !seen || procs_matching(marker).is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the sandbox never started `sleep {marker}` (cordon exited or hung): the test is vacuous"
        );
    }
}

both!(fn no_process_survives_a_timeout(who) {
    let m = marker(who, 1);
    let c = Cordon::exec(who, &["--json", "--timeout", "2s"], &["sh", "-c", &format!("sleep {m} & sleep 100")]);
    let start = Instant::now();
    let mut child = c.spawn(Stdio::piped(), Stdio::piped());
    wait_for_marker(&m, &mut child);
    let finished = wait_with_deadline(child, start, Duration::from_secs(30), c.argv());
    assert_none_left(&m, Duration::ZERO, &format!("after a timeout:\n{}", finished.describe()));
    assert_eq!(finished.code, 124, "{}", finished.describe());
});

both!(fn no_process_survives_main_exit(who) {
    // The main process exits 0 while a background child sleeps: the run ends, the child dies.
    let m = marker(who, 2);
    let r = exec_json_run(who, &["--timeout", "20s"], &["sh", "-c", &format!("sleep {m} >/dev/null 2>&1 & sleep 1; echo main-done")]);
    assert_none_left(&m, Duration::ZERO, &format!("after the main process exited:\n{}", r.describe()));
    assert_eq!(r.output(), "main-done\n", "{}", r.describe());
    assert_eq!(r.status(), "ok", "{}", r.describe());
    assert!(r.elapsed() < Duration::from_secs(10), "{}", r.describe());
});

// Case 32 as a daemon does it: fork, setsid, fork again, close stdio, chdir /, and the
// parent exits 0 at once. The daemon must not outlive the run.
both!(fn a_daemonized_process_does_not_survive(who) {
    let m = marker(who, 7);
    let code = format!(
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.chdir('/')\n        for fd in (0, 1, 2):\n            os.close(fd)\n        os.execvp('sleep', ['sleep', '{m}'])\n    os._exit(0)\nos.wait()\ndef seen():\n    for p in os.listdir('/proc'):\n        try:\n            if b'{m}' in open('/proc/%s/cmdline' % p, 'rb').read():\n                return True\n        except OSError:\n            pass\n    return False\nfor _ in range(100):\n    if seen():\n        print('daemon-running')\n        break\n    time.sleep(0.02)\nprint('parent-done')\n"
    );
    let r = exec_json_run(who, &["--timeout", "20s"], &[PY, "-c", &code]);
    assert_eq!((r.status(), r.output()), ("ok", "daemon-running\nparent-done\n"), "{}", r.describe());
    assert!(r.elapsed() < Duration::from_secs(8), "cordon waited for the daemon:\n{}", r.describe());
    assert_none_left(&m, Duration::ZERO, &format!("the daemon survived the run:\n{}", r.describe()));
});

both!(fn grandchild_holding_stdout_does_not_hang(who) {
    // A double-forked grandchild keeps the stdout pipe open after the main process exits.
    let m = marker(who, 3);
    let script = format!("(sleep {m} &); echo done");
    let r = exec_json_run(who, &["--timeout", "20s"], &["sh", "-c", &script]);
    assert!(r.elapsed() < Duration::from_secs(8), "cordon waited on the grandchild's pipe:\n{}", r.describe());
    assert_eq!(r.status(), "ok", "{}", r.describe());
    assert_eq!(r.output(), "done\n", "{}", r.describe());
    assert_none_left(&m, Duration::ZERO, &format!("the grandchild survived the run:\n{}", r.describe()));

    // Same without --json: the pipe is cordon's own stdout, inherited by the caller.
    let plain = exec_plain(who, &["--timeout", "20s"], &["sh", "-c", &script]);
    assert!(plain.elapsed < Duration::from_secs(8), "{}", plain.describe());
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert_eq!(plain.stdout_str(), "done\n", "{}", plain.describe());
});

// cordon's stdout a terminal that stops being read (a pager, `ssh -t`, an agent's
// pseudo-terminal): a blocking write to a terminal waits until it has taken all of it, and the
// supervisor, stuck there, enforced neither the timeout nor the memory watch (10 processes
// held 1 GiB under --memory 128M past a 5 s timeout). The terminal is written non-blocking
// now: the timeout holds, and what is left is written once the terminal reads again.
both!(fn a_terminal_that_stops_reading_does_not_stall_supervision(who) {
    let m = marker(who, 9);
    let pty = nix::pty::openpty(None, None).expect("openpty");
    if who == Who::User {
        // The caller's own terminal, as a login's is.
        nix::unistd::fchown(&pty.slave, Some(nix::unistd::Uid::from_raw(who.caller_uid())), None)
            .expect("chown the terminal to the caller");
    }
    // The output first (what fills the terminal), the marker a second later.
    let script = format!("head -c 2000000 /dev/zero | tr '\\0' x & sleep 1; sleep {m}");
    let timeout = 3.0 * time_scale();
    let c = Cordon::exec(who, &["--timeout", &format!("{timeout}s")], &["sh", "-c", &script]);
    let start = Instant::now();
    let mut child = c.spawn(Stdio::from(pty.slave), Stdio::null());
    wait_for_marker(&m, &mut child);
    // Nobody reads the terminal until well past the timeout.
    let by = Duration::from_secs_f64(timeout + 4.0 * time_scale());
    std::thread::sleep(by.saturating_sub(start.elapsed()));
    let left = procs_matching(&m);
    // Then it is read again, and cordon finishes writing and exits.
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(pty.master);
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0usize;
        while let Ok(k) = std::io::Read::read(&mut f, &mut buf) {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    });
    let finished = wait_with_deadline(child, start, Duration::from_secs(60), c.argv());
    assert!(left.is_empty(), "the sandbox outlived its {timeout} s timeout ({by:?} after the start) while the terminal was not read:\n{}", finished.describe());
    assert_eq!(finished.code, 124, "{}", finished.describe());
    drop(reader);
});

both!(fn sigkill_of_cordon_kills_the_sandbox(who) {
    let m = marker(who, 4);
    // A temp directory of its own: nothing of the run may be left there (nor anywhere else).
    let tmp = shared_tempdir();
    let c = Cordon::exec(who, &["--timeout", "60s"], &["sh", "-c", &format!("sleep {m} & sleep {m}; wait")])
        .env("TMPDIR", tmp.path());
    let mut child = c.spawn(Stdio::null(), Stdio::null());
    wait_for_marker(&m, &mut child);
    // With setpriv, setpriv execs cordon: the child's pid is cordon's pid.
    let cordon_pid = child.id();
    let cgroups = sandbox_cgroups_of(cordon_pid);
    if expected_auto_backend(who).is_some_and(|b| b.starts_with("cgroup")) {
        assert!(!cgroups.is_empty(), "no cgroup cordon-{cordon_pid}-* found while the sandbox runs");
    }
    let before = mount_points();
    child.kill().expect("SIGKILL cordon");
    child.wait().expect("reap cordon");
    assert_none_left(&m, Duration::from_secs(1), "after SIGKILL of the cordon process");
    // Its cgroup keeper removes the sandbox cgroups (no next run of cordon needed).
    let gone = wait_until(Duration::from_secs(1), || cgroups.iter().all(|c| !c.exists()));
    assert!(gone, "sandbox cgroups left 1 s after SIGKILL of cordon: {:?}",
        cgroups.iter().filter(|c| c.exists()).collect::<Vec<_>>());
    // The run's mounts live in its own mount namespace (held by the keeper until it exits,
    // not by any process of the sandbox), never in the host's mount table.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains("lowerdir=/proc/self/fd/"),
        "a sandbox mount shows in the host's mount table:\n{mounts}");
    let added: Vec<_> = mount_points().into_iter().filter(|p| !before.contains(p)).collect();
    assert!(added.is_empty(), "mounts added to the host's table by the killed run: {added:?}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "the killed run left {left:?} in its TMPDIR");
});

both!(fn no_helper_is_left_a_zombie_while_the_program_runs(who) {
    // cordon's helper that makes the network namespace has ended and been reaped before the
    // program starts: a zombie held a pid for the whole run, and under the rlimit backend's
    // RLIMIT_NPROC (which counts a task until it is reaped) one of the program's processes.
    // While the program runs, cordon's children are its init and its keeper, none a zombie.
    let m = marker(who, 12);
    let c = Cordon::exec(who, &["--timeout", "60s"], &["sleep", &m]);
    let mut child = c.spawn(Stdio::null(), Stdio::null());
    let cordon_pid = child.id();
    // The program runs (cordon's own command line names the marker too).
    let running = wait_until(Duration::from_secs(10), || {
        procs_matching(&m).iter().any(|&p| p != cordon_pid)
    });
    let children: Vec<(u32, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_ascii_whitespace();
            let state = fields.next()?.to_string();
            let ppid: u32 = fields.next()?.parse().ok()?;
            (ppid == cordon_pid).then_some((pid, state))
        })
        .collect();
    child.kill().expect("SIGKILL cordon");
    child.wait().expect("reap cordon");
    assert_none_left(&m, Duration::from_secs(1), "after SIGKILL of the cordon process");
    assert!(running, "the program did not start within 10 s");
    assert!(
        !children.is_empty() && children.len() <= 2,
        "cordon's children while the program runs are its init and keeper: {children:?}"
    );
    assert!(
        children.iter().all(|(_, state)| state != "Z"),
        "a zombie child of cordon while the program runs: {children:?}"
    );
});

both!(fn sigterm_and_sigint_of_cordon_kill_the_sandbox(who) {
    for (i, sig) in [nix::sys::signal::SIGTERM, nix::sys::signal::SIGINT].into_iter().enumerate() {
        let m = marker(who, 5 + i as u32);
        let c = Cordon::exec(who, &["--json", "--timeout", "60s"], &["sh", "-c", &format!("sleep {m}")]);
        let start = Instant::now();
        let mut child = c.spawn(Stdio::piped(), Stdio::piped());
        wait_for_marker(&m, &mut child);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig)
            .unwrap_or_else(|e| panic!("{sig} to cordon: {e}"));
        let finished = wait_with_deadline(child, start, Duration::from_secs(20), c.argv());
        assert_none_left(&m, Duration::ZERO, &format!("after {sig} of cordon:\n{}", finished.describe()));
        // The sandbox is killed, and the result is still printed: status `killed`, 128+signal.
        let v: serde_json::Value = serde_json::from_slice(&finished.stdout)
            .unwrap_or_else(|e| panic!("no JSON result after {sig} ({e}):\n{}", finished.describe()));
        assert_eq!(v["status"], "killed", "{sig}:\n{}", finished.describe());
        assert_eq!(finished.code, 128 + sig as i32, "{sig}:\n{}", finished.describe());
        assert_eq!(v["cliExitCode"], 128 + sig as i32, "{sig}:\n{}", finished.describe());
        let msg = v["message"].as_str().unwrap_or_default();
        assert!(msg.contains(sig.as_str()), "the message must name {sig}: {msg}");
    }
});

/// The host's mount points with their sources and types (mountinfo fields 5, 9 and 10).
fn mount_points() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-").unwrap_or(f.len());
            format!("{} {}", f.get(4).unwrap_or(&"?"), f[sep..].join(" "))
        })
        .collect()
}

// A caller that is PID 1 of its pid namespace and reaps only the children it started (an
// agent's server run as a container's first process): every process cordon forked for a run
// is gone and reaped when cordon returns, so none is handed to the caller as a zombie. Root
// only: an unprivileged caller cannot make a pid namespace without a user namespace, and
// cordon inside one cannot map its sandbox's ids.
#[test]
fn a_pid_1_caller_is_left_no_zombie() {
    let test = "a_pid_1_caller_is_left_no_zombie";
    if !running_as_root() {
        skip!("SKIP: {test}: needs root (a pid namespace without a user namespace)");
        return;
    }
    // PID 1 of a new pid namespace, as `python3` (not an init cordon knows to reap): runs
    // cordon five times, then lists the processes whose parent it is.
    let script = r#"
import os, subprocess, sys, time
for _ in range(5):
    r = subprocess.run([sys.argv[1], "exec", "--", "/bin/true"], capture_output=True)
    assert r.returncode == 0, r
time.sleep(0.3)
left = []
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        st = open(f"/proc/{p}/stat").read()
    except OSError:
        continue
    fields = st[st.rfind(")") + 2:].split()
    if fields[1] == "1":
        left.append(st[:st.rfind(")") + 1] + " " + fields[0])
print(open("/proc/1/comm").read().strip(), len(left), left)
"#;
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", PY, "-c", script])
        .arg(cordon_bin())
        .output()
        .expect("run unshare");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.trim() == "python3 0 []",
        "processes left to PID 1:\nstdout: {text}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// A reader of cordon's stdout that goes away (`cordon exec -- CMD | head -1`) ends the
// program's writes there as a pipe straight from the program would: at its next write it
// gets SIGPIPE (cordon exits 141), at once, not when the timeout or the output limit ends
// the run. With `--json --stream` the result cannot be written either: cordon says so and
// exits 125, as soon.
both!(fn a_reader_that_goes_away_ends_the_programs_writes(who) {
    use std::io::BufRead;
    let looping = ["sh", "-c", "while :; do echo x; sleep 0.05; done"];
    for (opts, code) in [(&["--timeout", "20s"][..], 141), (&["--timeout", "20s", "--json", "--stream"], 125)] {
        let start = Instant::now();
        let mut child = Cordon::exec(who, opts, &looping).spawn(Stdio::piped(), Stdio::piped());
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(first.contains('x'), "{opts:?}: {first:?}");
        // The reader is dropped here: cordon's stdout now has none.
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                panic!("{opts:?}: cordon went on after its reader was gone");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(code), "{opts:?}: {err}");
        assert!(start.elapsed() < Duration::from_secs(10), "{opts:?}: took {:?}", start.elapsed());
        if code == 125 {
            assert!(err.contains("cannot write the result"), "{err}");
        }
    }
});

// Passing output through (no --json) holds none of stdout in cordon's memory, whatever
// --output-limit allows: 200 MB of output through a cordon that, holding it, would grow by
// as much. Measured as the peak RSS of cordon's process (a python wrapper's
// RUSAGE_CHILDREN, which counts only the cordon it ran).
both!(fn passed_through_output_is_not_held(who) {
    let argv = Cordon::exec(who, &["--output-limit", "1G"], &["head", "-c", "200000000", "/dev/zero"]).argv();
    let script = "import resource, subprocess, sys\n\
                  r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n\
                  print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n";
    let out = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .args(&argv)
        .current_dir("/")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().unwrap_or(u64::MAX));
    let (code, maxrss_kib) = (it.next(), it.next().unwrap_or(u64::MAX));
    assert_eq!(code, Some(0), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(maxrss_kib < 64 << 10, "cordon's peak RSS was {maxrss_kib} KiB for 200 MB passed through");
});

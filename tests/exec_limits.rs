//! Limits of `cordon exec`: wall and CPU time, memory, pids, output, file size, workspace, fds,
//! and the limits backend (cgroup v2 / v1 / rlimit).
//!
//! Timing asserts are deliberately loose (the machine is shared and noisy): a status plus an
//! upper bound such as "returned within timeout + 5 s", never a tight figure.
//!
//! The bombs are bounded so that a launcher that fails to enforce a limit fails the test instead
//! of taking the machine down: the memory bomb stops at 400 MB, the fork bomb at 64 children,
//! the output flood at 50 MB.

#[macro_use]
mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

const MIB: usize = 1024 * 1024;

/// `bound` is scaled by `$CORDON_TEST_TIME_SCALE` (see [`time_scale`]).
fn assert_within(r: &JsonRun, bound: Duration) {
    let bound = bound.mul_f64(time_scale());
    assert!(
        r.elapsed() < bound,
        "cordon took {:?}, bound {bound:?}:\n{}",
        r.elapsed(),
        r.describe()
    );
}

both!(fn timeout_kills_and_exits_124(who) {
    let r = exec_json_run(who, &["--timeout", "1s"], &["sleep", "100"]);
    assert_eq!(r.status(), "timeout", "{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    assert_within(&r, Duration::from_secs(6));

    let plain = exec_plain(who, &["--timeout", "1s"], &["sleep", "100"]);
    assert_eq!(plain.code, 124, "{}", plain.describe());
    assert!(plain.elapsed < Duration::from_secs(6).mul_f64(time_scale()), "{}", plain.describe());
    // Its stdin was at its end: no word of input.
    assert!(!r.get("/message").as_str().unwrap_or("").contains("waiting for input"), "{}", r.describe());
});

// A program that waits on a stdin nobody writes to (an `input()` prompt) and times out is told
// so: more time would not have ended it.
both!(fn a_timeout_waiting_on_stdin_is_said(who) {
    // Long enough that the shell's start is under a tenth of it, also on a slow (emulated)
    // machine.
    let mut held = Cordon::exec(who, &["--json", "--timeout", "4s"], &["sh", "-c", "read x"]).hold();
    std::thread::sleep(Duration::from_secs(6).mul_f64(time_scale()));
    let f = held.finish();
    let r: serde_json::Value = serde_json::from_slice(&f.stdout).unwrap_or_else(|e| panic!("{e}\n{}", f.describe()));
    assert_eq!(r["status"], json!("timeout"), "{}", f.describe());
    let msg = r["message"].as_str().unwrap_or("");
    assert!(msg.contains("its stdin was an open pipe with nothing in it: if it was waiting for input, give all of it with --stdin FILE"), "{}", f.describe());
});

both!(fn timeout_kills_sigterm_ignoring_process(who) {
    let r = exec_json_run(who, &["--timeout", "1s"], &["sh", "-c", "trap '' TERM INT HUP; sleep 100; sleep 100"]);
    assert_eq!(r.status(), "timeout", "{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_within(&r, Duration::from_secs(6));
});

both!(fn timeout_kills_stopped_process(who) {
    let r = exec_json_run(who, &["--timeout", "1s"], &["sh", "-c", "sleep 100 & kill -STOP $$; sleep 100"]);
    assert_eq!(r.status(), "timeout", "{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_within(&r, Duration::from_secs(6));
});

// Case 31: pause() in the main process and in a child that ignores SIGTERM.
both!(fn timeout_kills_paused_processes(who) {
    let code = "import os, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nif os.fork() == 0:\n    signal.pause()\nsignal.pause()\n";
    let r = exec_json_run(who, &["--timeout", "1s"], &[PY, "-c", code]);
    assert_eq!((r.status(), r.code()), ("timeout", 124), "{}", r.describe());
    assert_within(&r, Duration::from_secs(6));
});

both!(fn duration_and_size_syntax(who) {
    for (timeout, ms) in [("30", 30_000.0), ("1.5s", 1_500.0), ("4500ms", 4_500.0), ("2m", 120_000.0)] {
        let r = exec_json_run(who, &["--timeout", timeout, "--memory", "256M"], &["true"]);
        r.expect_ok();
        assert_eq!(r.get("/limits/wallTimeMs/value").as_f64(), Some(ms), "--timeout {timeout}:\n{}", r.describe());
        assert_eq!(
            r.get("/limits/memoryBytes/value").as_f64(),
            Some(256.0 * MIB as f64),
            "--memory 256M:\n{}",
            r.describe()
        );
    }
});

both!(fn cpu_time_limit(who) {
    // A busy loop under --cpu-time 1s ends long before the wall clock limit.
    let r = exec_json_run(who, &["--cpu-time", "1s", "--timeout", "20s"], &[PY, "-c", "while True: pass"]);
    assert_eq!(r.status(), "timeout", "a CPU-time kill is a timeout:\n{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_within(&r, Duration::from_secs(15));
    // Without a cgroup the message says why the time used can pass the limit.
    let msg = r.get("/message").as_str().unwrap_or("");
    let rlimit = r.get("/limits/cpuTimeMs/enforcement") == &json!("rlimit");
    assert_eq!(msg.contains("whole seconds (1 s) for each process on its own"), rlimit, "{}", r.describe());
});

both!(fn cpu_time_limit_says_what_enforced_it(who) {
    // Two busy processes under --cpu-time 1500ms: the report names the cgroup's summed
    // counter where cordon has a cgroup, and RLIMIT_CPU per process where it has not.
    let r = exec_json_run(
        who,
        &["--cpus", "2", "--cpu-time", "1500ms", "--timeout", "5s"],
        &["sh", "-c", "while :; do :; done & while :; do :; done"],
    );
    let backend = r.get("/limits/backend").as_str().unwrap_or("?").to_string();
    let report = r.get("/limits/cpuTimeMs");
    assert_eq!(report["value"], json!(1500), "{}", r.describe());
    let note = report["note"].as_str().unwrap_or("");
    if backend == "rlimit" {
        assert_eq!(report["enforcement"], json!("rlimit"), "{}", r.describe());
        assert!(note.contains("per process"), "{}", r.describe());
    } else {
        assert_eq!(report["enforcement"], json!(backend), "the cgroup's counter holds it:\n{}", r.describe());
        assert!(note.contains("summed over its processes"), "{}", r.describe());
        assert_eq!(r.status(), "timeout", "{}", r.describe());
    }
});

both!(fn cpu_time_zero_is_no_limit(who) {
    // 0 lifts the CPU-time limit, as it lifts --memory, --cpus and --pids (it had stopped
    // every program at once).
    let r = exec_json_run(who, &["--cpu-time", "0"], &[PY, "-c", "sum(range(10**6)); print('done')"]);
    assert_eq!(r.expect_ok(), "done\n", "{}", r.describe());
    assert!(r.get("/limits/cpuTimeMs").is_null(), "no CPU-time limit is reported:\n{}", r.describe());
});

both!(fn a_zero_output_limit_is_refused(who) {
    let f = exec_plain(who, &["--output-limit", "0"], &["sh", "-c", "echo RAN"]);
    assert_eq!(f.code, 125, "{}", f.describe());
    assert!(!f.stdout_str().contains("RAN"), "nothing runs:\n{}", f.describe());
    let err = f.stderr_str();
    assert!(err.contains("--output-limit") && err.contains("cannot be lifted"), "{}", f.describe());
});

both!(fn a_program_signalling_itself_sigxcpu_is_not_a_timeout(who) {
    // SIGXCPU is the CPU-time limit only when that limit was set (it read "the CPU-time
    // limit of 0ns was reached").
    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "kill -XCPU $$"]);
    assert_eq!(r.status(), "signaled", "{}", r.describe());
    assert_eq!(r.code(), 128 + 24, "{}", r.describe());
    // Nor with the limit set and most of it left: only RLIMIT_CPU's SIGXCPU, near the limit,
    // is a timeout.
    let r = exec_json_run(who, &["--cpu-time", "20s"], &["sh", "-c", "kill -XCPU $$"]);
    assert_eq!(r.status(), "signaled", "{}", r.describe());
    assert_eq!(r.code(), 128 + 24, "{}", r.describe());
});

/// Allocates (and touches) 10 MB at a time, at most 400 MB.
const MEMORY_BOMB: &str = "\
a = []
for i in range(40):
    a.append(bytearray(10 * 1024 * 1024))
print('NOT LIMITED: allocated', len(a) * 10, 'MB')
";

fn memory_bomb(who: Who, extra: &[&str]) {
    let mut opts = vec!["--memory", "128M", "--timeout", "30s"];
    opts.extend_from_slice(extra);
    let r = exec_json_run(who, &opts, &[PY, "-c", MEMORY_BOMB]);
    assert!(
        !r.output().contains("NOT LIMITED"),
        "the memory limit was not enforced:\n{}",
        r.describe()
    );
    assert_eq!(r.status(), "memory_limit", "{}", r.describe());
    assert_eq!(r.code(), 137, "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    assert_eq!(
        r.get("/limits/memoryBytes/value").as_f64(),
        Some(128.0 * MIB as f64),
        "{}",
        r.describe()
    );
    let backend = r.backend();
    if backend == "rlimit" {
        // No cgroup: the kill is deduced from Python's MemoryError at RLIMIT_DATA, or made by
        // the supervisor's memory watch if its poll saw the sandbox over the limit first; the
        // result says which.
        let oom = r.get("/oomKilledSource").as_str().unwrap_or("");
        assert!(
            ["inferred", "polled"].contains(&oom),
            "oomKilledSource {oom:?}:\n{}",
            r.describe()
        );
        let src = r.get("/memoryUsedSource").as_str().unwrap_or("");
        assert!(
            ["inferred", "rusage", "polled"].contains(&src),
            "memoryUsedSource {src:?}:\n{}",
            r.describe()
        );
    } else {
        assert_eq!(
            r.get("/oomKilledSource"),
            &json!(backend),
            "{}",
            r.describe()
        );
        assert_eq!(r.get("/oomKilled"), &json!(true), "{}", r.describe());
        assert_eq!(
            r.get("/memoryUsedSource"),
            &json!(backend),
            "{}",
            r.describe()
        );
        let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
        assert!(
            (64 * MIB as u64..=160 * MIB as u64).contains(&used),
            "peak memory {used} should be near the 128M limit:\n{}",
            r.describe()
        );
    }

    let plain = exec_plain(who, &opts, &[PY, "-c", MEMORY_BOMB]);
    assert_eq!(plain.code, 137, "{}", plain.describe());
}

both!(fn memory_bomb_is_memory_limit(who) {
    memory_bomb(who, &[]);
});

both!(fn memory_bomb_with_forced_rlimit_is_memory_limit(who) {
    memory_bomb(who, &["--limits-backend", "rlimit"]);
});

fn fork_bomb(who: Who, extra: &[&str]) {
    // The timeout is only a backstop (the payload exits as soon as fork fails; its sleeping
    // children must not keep the run alive): generous, for emulated guests (scripts/vm-test).
    let mut opts = vec!["--pids", "16", "--timeout", "20s"];
    opts.extend_from_slice(extra);
    let r = exec_json_run(who, &opts, &[PY, "-c", FORK_BOMB]);
    assert_within(&r, Duration::from_secs(20 + 5));
    let line = r.output().trim().to_string();
    let (forks, err) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("no fork report:\n{}", r.describe()));
    let forks: u32 = forks
        .parse()
        .unwrap_or_else(|_| panic!("bad fork report:\n{}", r.describe()));
    assert_eq!(
        err,
        "EAGAIN",
        "fork must fail with EAGAIN at the pids limit:\n{}",
        r.describe()
    );
    assert!(
        forks < 16,
        "{forks} forks succeeded under --pids 16:\n{}",
        r.describe()
    );
    assert_eq!(
        r.get("/limits/pids/value").as_f64(),
        Some(16.0),
        "{}",
        r.describe()
    );
    // The payload exited 0; its sleeping children must not keep the run alive to the timeout.
    r.expect_ok();
}

both!(fn fork_bomb_is_contained(who) {
    fork_bomb(who, &[]);
});

both!(fn fork_bomb_with_forced_rlimit_is_contained(who) {
    fork_bomb(who, &["--limits-backend", "rlimit"]);
});

// `--pids N` is the sandbox's N processes and threads, its init among them: the program gets
// exactly N - 1, whichever backend holds them. Under RLIMIT_NPROC cordon's network-namespace
// helper, which joins the sandbox's user namespace, counted as one of them until cordon
// reaped it after the run, so a program got one fewer than under a cgroup.
fn pids_are_exactly_the_limit(who: Who, extra: &[&str]) {
    let py = "import os\nr, w = os.pipe()\nkids = 0\nwhile kids < 20:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        os.close(w)\n        os.read(r, 1)\n        os._exit(0)\n    kids += 1\nos.close(w)\nfor _ in range(kids):\n    os.wait()\nprint(kids)\n";
    for n in [3u32, 6] {
        let mut opts = vec!["--pids".to_string(), n.to_string()];
        opts.extend(extra.iter().map(|s| s.to_string()));
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let r = exec_json_run(who, &opts, &[PY, "-c", py]);
        assert_eq!(r.status(), "ok", "{}", r.describe());
        // init, the Python process, and its children.
        assert_eq!(
            r.output().trim(),
            (n - 2).to_string(),
            "children forked under --pids {n} ({} backend):\n{}",
            r.backend(),
            r.describe()
        );
    }
}

both!(fn pids_are_exactly_the_limit_under_the_default_backend(who) {
    pids_are_exactly_the_limit(who, &[]);
});

both!(fn pids_are_exactly_the_limit_under_rlimit(who) {
    pids_are_exactly_the_limit(who, &["--limits-backend", "rlimit"]);
});

// Without a cgroup, RLIMIT_NPROC and RLIMIT_DATA count no refusals: what the memory watch saw
// names them instead. A program that hangs once it cannot start more threads (Node.js under a
// low --pids did) is told of --pids beside its timeout; one whose thread stacks RLIMIT_DATA
// refused (each counts in full when made) of --memory.
both!(fn limits_without_counters_are_named_when_met(who) {
    let timeout = format!("{}s", 3.0 * time_scale());
    let py = "import threading\nev = threading.Event()\ntry:\n    for _ in range(50):\n        threading.Thread(target=ev.wait).start()\nexcept RuntimeError:\n    pass\nev.wait(60)\n";
    let r = exec_json_run(
        who,
        &["--limits-backend", "rlimit", "--pids", "6", "--timeout", &timeout],
        &[PY, "-c", py],
    );
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        r.status() == "timeout"
            && msg.contains("saw the sandbox at its limit of processes and threads")
            && msg.contains("6 processes and threads")
            && msg.contains("--pids"),
        "{}",
        r.describe()
    );
    let py = "import threading\nthreading.stack_size(16 << 20)\nev = threading.Event()\nfor _ in range(20):\n    threading.Thread(target=ev.wait, daemon=True).start()\n";
    let r = exec_json_run(
        who,
        &["--limits-backend", "rlimit", "--memory", "64M", "--pids", "100", "--timeout", &timeout],
        &[PY, "-c", py],
    );
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        r.status() == "runtime_error"
            && msg.contains("the memory limit of 64 MiB refused a request for 16 MiB")
            && msg.contains("--memory")
            && !msg.contains("--pids"),
        "{}",
        r.describe()
    );
});

// A program that meets the pids limit, handles the refused forks and exits 0 keeps status
// `ok` and its code; where the kernel counts the refusals (a cgroup), the message says the
// limit was met, as the README promises for any pidsLimitHits above 0; under RLIMIT_NPROC,
// which counts none, only the program's own words would (this one prints none).
both!(fn an_ok_run_that_met_the_pids_limit_says_so(who) {
    let py = "import os, time\nkids = []\nfor _ in range(20):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(1)\n        os._exit(0)\n    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\nprint(len(kids))\n";
    let r = exec_json_run(who, &["--pids", "8"], &[PY, "-c", py]);
    assert_eq!((r.status(), r.code()), ("ok", 0), "{}", r.describe());
    let forked: u64 = r.output().trim().parse().unwrap_or(99);
    assert!(forked < 8, "forked {forked} children under --pids 8:\n{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    if r.backend().starts_with("cgroup") {
        assert!(r.get("/pidsLimitHits").as_u64().is_some_and(|n| n > 0), "{}", r.describe());
        assert!(
            msg.starts_with("the program exited with code 0, but fork or clone failed")
                && msg.contains("at the limit of 8 processes"),
            "{}",
            r.describe()
        );
    } else {
        assert!(r.get("/pidsLimitHits").is_null(), "{}", r.describe());
        assert_eq!(r.get("/message"), &serde_json::Value::Null, "{}", r.describe());
    }
});

// Case 27, unbounded: a shell fork bomb and `while True: os.fork()` in every process, which
// never stop on their own. The pids limit holds them, the timeout ends the run on time (cordon
// stays responsive), and the result counts the refused forks where the kernel does (cgroup
// pids.events; RLIMIT_NPROC has no counter: null).
both!(fn unbounded_fork_bombs_are_held_and_reported(who) {
    let py = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    for (name, argv) in [
        // The bomb runs beside the main process, which forks once, before it, then `exec`s:
        // a main shell that forks later fails ("Cannot fork") and ends the run before the
        // timeout.
        ("shell", ["sh", "-c", "bomb() { bomb | bomb & }; (bomb) & exec sleep 100"]),
        ("python", [PY, "-c", py]),
    ] {
        // A low limit, reached within the timeout even on a slow machine (the cgroup v2 guest
        // of scripts/vm-test runs under emulation: a Python fork there takes tens of ms, and
        // Python's start a second or more; the timeout grows with $CORDON_TEST_TIME_SCALE).
        let timeout = 3.0 * time_scale();
        let r = exec_json_run(who, &["--pids", "8", "--timeout", &format!("{timeout}s")], &argv);
        assert_eq!((r.status(), r.code()), ("timeout", 124), "{name}:\n{}", r.describe());
        assert_within(&r, Duration::from_secs_f64(3.0 + 7.0));
        let hits = r.get("/pidsLimitHits");
        if r.backend().starts_with("cgroup") {
            assert!(hits.as_u64().is_some_and(|n| n > 0), "{name}: pidsLimitHits {hits}:\n{}", r.describe());
            let msg = r.get("/message").as_str().unwrap_or_default();
            assert!(msg.contains("fork or clone failed") && msg.contains("at the limit of 8 processes"), "{name}: {msg}");
        } else {
            assert!(hits.is_null(), "{name}: nothing counts refused forks under rlimit:\n{}", r.describe());
        }
    }
});

fn output_flood(who: Who, to_stderr: bool) {
    let script = if to_stderr {
        "yes | head -c 50000000 >&2"
    } else {
        "yes | head -c 50000000"
    };
    let opts = ["--output-limit", "1M", "--timeout", "20s"];
    let r = exec_json_run(who, &opts, &["sh", "-c", script]);
    assert_eq!(r.status(), "output_limit", "{}", r.describe());
    assert_eq!(r.code(), 137, "{}", r.describe());
    assert_eq!(r.get("/outputTruncated"), &json!(true), "{}", r.describe());
    let (captured, other) = if to_stderr {
        (r.error(), r.output())
    } else {
        (r.output(), r.error())
    };
    assert!(
        captured.len() <= MIB,
        "captured {} bytes over a 1M limit",
        captured.len()
    );
    assert!(
        captured.len() >= 64 * 1024,
        "the output up to the limit must be kept, got {} bytes",
        captured.len()
    );
    assert!(captured.starts_with("y\ny\n"), "{}", r.describe());
    assert!(other.is_empty(), "{}", r.describe());
    assert_within(&r, Duration::from_secs(15));

    let plain = exec_plain(who, &opts, &["sh", "-c", script]);
    assert_eq!(plain.code, 137, "{}", plain.describe());
    let passed = if to_stderr {
        &plain.stderr
    } else {
        &plain.stdout
    };
    assert!(
        passed.len() <= MIB + 4096,
        "{} bytes passed through over a 1M limit",
        passed.len()
    );
}

both!(fn output_flood_stdout_is_output_limit(who) {
    output_flood(who, false);
});

both!(fn output_flood_stderr_is_output_limit(who) {
    output_flood(who, true);
});

both!(fn file_size_limit(who) {
    let r = exec_json_run(
        who,
        &["--file-size", "1M"],
        &["sh", "-c", "head -c 3000000 /dev/zero > big 2>/dev/null; stat -c %s big"],
    );
    let size: usize = r.output().trim().parse().unwrap_or_else(|_| panic!("{}", r.describe()));
    assert!(size <= MIB, "a {size}-byte file was written under --file-size 1M:\n{}", r.describe());
    assert_eq!(r.status(), "ok", "{}", r.describe());
    // The writer itself killed by SIGXFSZ: the message names the limit and the flag.
    let r = exec_json_run(
        who,
        &["--file-size", "1M"],
        &["sh", "-c", "exec head -c 3000000 /dev/zero > big"],
    );
    assert_eq!((r.status(), r.code()), ("signaled", 128 + 25), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        msg.contains("SIGXFSZ") && msg.contains("1 MiB") && msg.contains("--file-size"),
        "{}",
        r.describe()
    );
    // A program that ignores SIGXFSZ (Python does) gets EFBIG and fails with its own words,
    // which say nothing of a limit: the message names it.
    let r = exec_json_run(who, &["--file-size", "1M"], &[PY, "-c", "open('big', 'wb').write(b'x' * (2 << 20))"]);
    assert_eq!((r.status(), r.code()), ("runtime_error", 1), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(msg.contains("EFBIG") && msg.contains("1 MiB") && msg.contains("--file-size"), "{}", r.describe());
});

both!(fn workspace_and_tmp_size_limits(who) {
    let r = exec_json_run(
        who,
        &["--workspace-size", "2M", "--tmp-size", "2M", "--file-size", "100M"],
        &[
            "sh",
            "-c",
            "head -c 6000000 /dev/zero > /workspace/big 2>/dev/null; stat -c %s /workspace/big; \
             head -c 6000000 /dev/zero > /tmp/big 2>/dev/null; stat -c %s /tmp/big",
        ],
    );
    let sizes: Vec<usize> = r.output().split_whitespace().filter_map(|s| s.parse().ok()).collect();
    assert_eq!(sizes.len(), 2, "{}", r.describe());
    assert!(sizes[0] <= 2 * MIB, "/workspace held {} bytes under --workspace-size 2M", sizes[0]);
    assert!(sizes[1] <= 2 * MIB, "/tmp held {} bytes under --tmp-size 2M", sizes[1]);
    // The writes' ENOSPC says nothing of a limit: the message names the two to raise.
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        msg.contains("/workspace is full (all of its 2 MiB are used)")
            && msg.contains("raise it with --workspace-size")
            && msg.contains("/tmp is full")
            && msg.contains("raise it with --tmp-size"),
        "{}",
        r.describe()
    );
});

both!(fn workspace_inode_limit(who) {
    let r = exec_json_run(
        who,
        &["--workspace-inodes", "40"],
        &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 200 ] && touch /workspace/f$i 2>/dev/null; do i=$((i+1)); done; echo $i",
        ],
    );
    let n: u64 = r.expect_ok().trim().parse().unwrap_or_else(|_| panic!("{}", r.describe()));
    assert!((20..40).contains(&n), "{n} files under --workspace-inodes 40:\n{}", r.describe());
    let reported = r.get("/limits/workspaceBytes/note").as_str().unwrap_or_default().to_string();
    assert!(reported.contains("40 inodes"), "the result must say the cap: {reported}\n{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        msg.starts_with("the program exited with code 0, but /workspace is full (all of its 40 files")
            && msg.ends_with("raise it with --workspace-inodes"),
        "{}",
        r.describe()
    );
});

// tmpfs reads 0 as "no cap": a 0 is refused, never a /workspace bounded only by memory.
both!(fn a_zero_tmpfs_cap_is_refused(who) {
    for flag in ["--workspace-size", "--workspace-inodes", "--tmp-size"] {
        let f = exec_plain(who, &[flag, "0"], &["true"]);
        assert_eq!(f.code, 125, "{flag} 0:\n{}", f.describe());
        let err = f.stderr_str();
        assert!(err.contains(flag) && err.contains("no cap"), "{flag} 0: {err}");
    }
});

both!(fn open_files_limit(who) {
    let r = exec_json_run(
        who,
        &["--open-files", "20"],
        &[PY, "-c", "import errno\nfs = []\ntry:\n    while len(fs) < 200: fs.append(open('/dev/null'))\nexcept OSError as e:\n    print(len(fs), errno.errorcode[e.errno])\n"],
    );
    let out = r.expect_ok().trim().to_string();
    let (n, err) = out.split_once(' ').unwrap_or_else(|| panic!("no EMFILE:\n{}", r.describe()));
    assert_eq!(err, "EMFILE", "{}", r.describe());
    assert!(n.parse::<u32>().unwrap() < 20, "{n} files opened under --open-files 20");
    // The same failure left to the program: its error names no limit, cordon's message does.
    let r = exec_json_run(who, &["--open-files", "20"], &[PY, "-c", "fs = [open('/dev/null') for _ in range(200)]"]);
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(msg.contains("EMFILE") && msg.contains("20 descriptors") && msg.contains("--open-files"), "{}", r.describe());
    // An ok run gets no such note, even when its output has the words.
    let r = exec_json_run(who, &["--open-files", "20"], &["sh", "-c", "echo 'Too many open files' >&2"]);
    assert_eq!(r.status(), "ok", "{}", r.describe());
    assert_eq!(r.get("/message"), &serde_json::Value::Null, "{}", r.describe());
});

both!(fn a_small_open_files_limit_is_the_programs(who) {
    // --open-files is set just before exec: cordon's own set-up (Landlock's ruleset, the
    // memory watch's listener) needs descriptors it would not leave.
    let r = exec_json_run(who, &["--open-files", "4"], &["sh", "-c", "ulimit -n"]);
    assert_eq!(r.expect_ok(), "4\n", "{}", r.describe());
    assert_eq!(r.get("/limits/openFiles/value"), &json!(4), "{}", r.describe());
});

both!(fn default_backend_matches_host(who) {
    let r = exec_json_run(who, &[] as &[&str], &["true"]);
    r.expect_ok();
    let backend = r.backend();
    if let Some(expected) = expected_auto_backend(who) {
        assert_eq!(backend, expected, "auto backend for {who:?} on a {:?} host:\n{}", cgroup_layout(), r.describe());
    }
    assert_eq!(r.get("/limits/memoryBytes/enforcement"), &json!(backend), "{}", r.describe());
    assert_eq!(r.get("/limits/pids/enforcement"), &json!(backend), "{}", r.describe());
    if backend == "rlimit" {
        assert_eq!(r.get("/limits/cpus/enforcement"), &json!("affinity"), "{}", r.describe());
    } else {
        assert_eq!(r.get("/limits/cpus/enforcement"), &json!(backend), "{}", r.describe());
    }
});

// More CPUs than the host has: set as asked (a cgroup quota, or every CPU cordon may use),
// and said, in the result and on stderr, with the number there is.
both!(fn cpus_beyond_the_host_are_said(who) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let said = format!("more than the {n} CPU(s) available here, so the sandbox gets at most {n}");
    let r = exec_json_run(who, &["--cpus", "999"], &["true"]);
    r.expect_ok();
    let note = r.get("/limits/cpus/note").as_str().unwrap_or("");
    assert!(note.contains(&said), "{}", r.describe());
    let f = exec_plain(who, &["--cpus", "999"], &["true"]);
    // The warning is that sentence alone, not the rest of the note (how it is held, the
    // fixes for a fraction of a CPU).
    assert!(f.code == 0 && f.stderr_str().contains(&format!("warning: --cpus 999 is {said}\n")), "{}", f.describe());
    assert!(!f.stderr_str().contains("a fraction of a CPU"), "{}", f.describe());
    let r = exec_json_run(who, &["--cpus", "1"], &["true"]);
    assert!(!r.get("/limits/cpus/note").as_str().unwrap_or("").contains("more than"), "{}", r.describe());
});

// Under RLIMIT_NPROC (no cgroup counts refusals), a program that exits 0 after forks failed
// (a fork bomb that waits) is told so from its stderr, as a counted refusal would be.
both!(fn refused_forks_of_a_successful_program_are_noted_without_a_cgroup(who) {
    let script = "import os, sys, time\nkids = []\nfor i in range(40):\n    try:\n        pid = os.fork()\n    except BlockingIOError as e:\n        print('fork failed:', e, file=sys.stderr)\n        continue\n    if pid == 0:\n        time.sleep(1)\n        os._exit(0)\n    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\n";
    let r = exec_json_run(who, &["--limits-backend", "rlimit", "--pids", "8"], &["python3", "-c", script]);
    assert_eq!(r.status(), "ok", "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.starts_with("the program exited with code 0, but its stderr reports a fork or thread it could not start") && msg.contains("RLIMIT_NPROC holds the sandbox to 8 processes") && msg.contains("--pids"), "{}", r.describe());
});

both!(fn forced_rlimit_backend(who) {
    let r = exec_json_run(who, &["--limits-backend", "rlimit"], &["true"]);
    r.expect_ok();
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    assert_eq!(r.get("/limits/memoryBytes/enforcement"), &json!("rlimit"), "{}", r.describe());
    assert_eq!(r.get("/limits/pids/enforcement"), &json!("rlimit"), "{}", r.describe());
    assert_eq!(r.get("/limits/cpus/enforcement"), &json!("affinity"), "{}", r.describe());
});

fn names_cgroup_v2(text: &str) -> bool {
    let t = text.to_lowercase();
    ["cgroup v2", "cgroup-v2", "cgroup2", "cgroupv2"]
        .iter()
        .any(|w| t.contains(w))
}

both!(fn forced_unavailable_backend_is_error_125(who) {
    if cgroup_layout() == CgroupLayout::PureV2 {
        skip!("SKIP: cgroup v2 is available on this host; nothing unavailable to force");
        return;
    }
    let plain = exec_plain(who, &["--limits-backend", "cgroup-v2"], &["true"]);
    assert_eq!(plain.code, 125, "{}", plain.describe());
    assert!(names_cgroup_v2(&plain.stderr_str()), "the error must name cgroup v2:\n{}", plain.describe());

    let r = exec_json_run(who, &["--limits-backend", "cgroup-v2"], &["true"]);
    assert_eq!(r.code(), 125, "{}", r.describe());
    assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("").to_string();
    assert!(names_cgroup_v2(&msg), "message must name cgroup v2:\n{}", r.describe());
    // The host's to fix (or another host's to run), not the request's.
    assert_eq!(r.get("/errorKind"), &json!("setup"), "{}", r.describe());

    // An unprivileged user cannot write the v1 hierarchies either.
    if who == Who::User && cgroup_layout() == CgroupLayout::HybridOrV1 {
        let plain = exec_plain(who, &["--limits-backend", "cgroup-v1"], &["true"]);
        assert_eq!(plain.code, 125, "{}", plain.describe());
    }
});

// A root cordon under a real-time policy on cgroup v1: the cpu controller refuses init into a
// group without real-time runtime; the error must say so and name the way out.
#[test]
fn realtime_caller_on_cgroup_v1_is_told_why() {
    if !nix::unistd::geteuid().is_root() {
        skip!("SKIP: needs root (only root may set SCHED_FIFO)");
        return;
    }
    let plain = exec_json_run(Who::Root, &[] as &[&str], &["true"]);
    plain.expect_ok();
    if plain.backend() != "cgroup-v1" {
        skip!(
            "SKIP: the auto backend here is {}, not cgroup-v1",
            plain.backend()
        );
        return;
    }
    let out = std::process::Command::new("chrt")
        .args(["-f", "1"])
        .arg(cordon_bin())
        .args(["exec", "--json", "--", "true"])
        .output()
        .expect("run chrt (util-linux)");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(out.status.code(), Some(125), "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("real-time scheduling policy") && msg.contains("--limits-backend rlimit"),
        "{v}"
    );
}

// Without --json, a --memory that no cgroup holds is said on stderr, in a few lines: what
// holds it and what that means (the full account is in the JSON result). A memory limit the
// caller did not ask for, or one a cgroup holds, is not warned about.
both!(fn memory_without_a_cgroup_is_warned_about_briefly(who) {
    let asked = exec_plain(who, &["--memory", "100M"], &["true"]);
    let default = exec_plain(who, &[] as &[&str], &["true"]);
    assert_eq!((asked.code, default.code), (0, 0), "{}", asked.describe());
    assert_eq!(default.stderr_str(), "", "no --memory given: {}", default.describe());
    let err = asked.stderr_str();
    if expected_auto_backend(who) == Some("rlimit") {
        assert!(
            err.starts_with("cordon: warning: --memory is not held by a cgroup here"),
            "{}",
            asked.describe()
        );
        assert!(err.contains("cordon doctor") && err.contains("--json"), "{err}");
        assert!(err.len() < 500, "{} bytes of warning: {err}", err.len());
    } else {
        assert_eq!(err, "", "a cgroup holds --memory: {}", asked.describe());
    }
});

// Under RLIMIT_DATA a memory failure is inferred from what the runtime prints, as its own
// phrase, and only with evidence that the limit was met: an ordinary error message that
// mentions allocating, or a program's own out-of-memory words far below the limit, is the
// program's own failure, with its own exit code.
both!(fn an_ordinary_error_is_not_taken_for_a_memory_failure_under_rlimit(who) {
    let opts = ["--limits-backend", "rlimit", "--memory", "256M"];
    let r = exec_json_run(who, &opts, &["sh", "-c", "echo 'error: cannot allocate widget' >&2; exit 3"]);
    assert_eq!((r.status(), r.code()), ("runtime_error", 3), "{}", r.describe());
    assert_eq!(r.get("/oomKilled").as_bool(), Some(false), "{}", r.describe());
    let r = exec_json_run(who, &opts, &["sh", "-c", "echo 'CUDA error: out of memory' >&2; exit 2"]);
    assert_eq!((r.status(), r.code()), ("runtime_error", 2), "{}", r.describe());
    let r = exec_json_run(who, &opts, &[PY, "-c", "raise MemoryError"]);
    assert_eq!((r.status(), r.code()), ("runtime_error", 1), "{}", r.describe());
    assert_eq!(r.get("/oomKilled").as_bool(), Some(false), "{}", r.describe());
    // One request over the limit: nothing grew, but the watch saw the limit refuse it.
    let r = exec_json_run(who, &opts, &[PY, "-c", "b = bytearray(1 << 30)"]);
    assert_eq!((r.status(), r.code()), ("memory_limit", 137), "{}", r.describe());
    assert_eq!(r.get("/oomKilledSource").as_str(), Some("inferred"), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("a request for 10") && msg.contains("more was over it"), "{}", r.describe());
});

/// Whether this test process holds CAP_SYS_RESOURCE (root may lack it in its bounding set).
fn has_cap_sys_resource() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0) // CAP_SYS_RESOURCE
}

// A caller whose hard core limit is 0 cannot give its sandbox RLIMIT_CORE 1, the only value
// that keeps a crash from starting a piped kernel.core_pattern's helper (as host root,
// outside the sandbox). Root raises its own limit where it may; otherwise, with a file
// pattern, the sandbox keeps 0 and the result says so; with a piped one the run is refused
// unless the caller accepts it (--allow-degraded core-dumps), and the result says so.
// scripts/vm-test's guest pipes its core_pattern, so that the last branch runs there.
both!(fn a_hard_core_limit_of_0_is_reported_or_refused(who) {
    const CORE: &str = "import resource; print(*resource.getrlimit(resource.RLIMIT_CORE))";
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    let run = |opts: &[&str]| {
        Cordon::exec(who, &[&["--json"], opts].concat(), &["python3", "-c", CORE])
            .shell_setup("ulimit -H -c 0")
            .run_json()
    };
    let r = run(&[]);
    let dumps = r.get("/isolation/coreDumps").as_str().unwrap_or("").to_string();
    if who == Who::Root && has_cap_sys_resource() {
        assert_eq!(r.expect_ok().trim(), "1 1", "{}", r.describe());
        assert!(dumps.starts_with("none (RLIMIT_CORE 1"), "{}", r.describe());
    } else if !pattern.trim().starts_with('|') {
        assert_eq!(r.expect_ok().trim(), "0 0", "{}", r.describe());
        assert!(dumps.starts_with("none (RLIMIT_CORE 0, as the caller's hard limit"), "{}", r.describe());
    } else {
        assert_eq!(r.code(), 125, "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("core-dump helper") && msg.contains("--allow-degraded core-dumps"), "{}", r.describe());
        let r = run(&["--allow-degraded", "core-dumps"]);
        assert_eq!(r.expect_ok().trim(), "0 0", "{}", r.describe());
        assert!(r.get("/isolation/coreDumps").as_str().unwrap_or("").starts_with("HANDED TO THE HOST'S HELPER"), "{}", r.describe());
    }
});

// A limit above cordon's own hard limit for it, which the sandbox's init could not set
// (only CAP_SYS_RESOURCE raises a hard limit; an unprivileged caller's `ulimit -Hu` under
// the rlimit backend's --pids), is the caller's error, said before anything runs.
both!(fn a_limit_above_the_callers_hard_limit_is_refused(who) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one struct rlimit into `lim`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut lim) }, 0);
    if lim.rlim_max >= 4 << 20 {
        skip_unless_required!("SKIP: a_limit_above_the_callers_hard_limit_is_refused: the hard limit of processes is {} (no --pids above it)", lim.rlim_max);
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).map(|v| u64::from_str_radix(v.trim(), 16).unwrap()).unwrap();
    // Bit 24: CAP_SYS_RESOURCE.
    let can_raise = who == Who::Root && eff & (1 << 24) != 0;
    let over = (lim.rlim_max + 1).to_string();
    let r = exec_json_run(who, &["--limits-backend", "rlimit", "--pids", over.as_str()], &["true"]);
    if can_raise {
        r.expect_ok();
    } else {
        assert_eq!((r.status(), r.get("/errorKind")), ("sandbox_error", &json!("request")), "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains(&format!("above cordon's own hard limit of {} processes", lim.rlim_max)), "{}", r.describe());
    }
    // CPU time's hard limit is a second above the limit (SIGKILL after SIGXCPU): under a
    // hard `ulimit -t 5`, 4 s is the most, and 5 s is refused before anything runs.
    if !can_raise {
        let run = |secs: &str| Cordon::exec(who, &["--json", "--cpu-time", secs], &["true"]).shell_setup("ulimit -t 5").run_json();
        run("4s").expect_ok();
        let r = run("5s");
        assert_eq!(r.get("/errorKind"), &json!("request"), "{}", r.describe());
        assert!(r.get("/message").as_str().unwrap_or("").contains("give at most 4"), "{}", r.describe());
    }
});

//! Hostile-input battery (issue 4), resources and load: case 28 (thread and shared-memory
//! bombs, with a cgroup and under the rlimit backend's polled memory watch), case 30 (a CPU burn on several processes is held to --cpus, CPU time from the
//! kernel) and case 41 (200 concurrent runs, no cross-wiring). Run as root and as the
//! unprivileged user. See tests/hostile/README.md for the case → test map.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeSet;
use std::time::Duration;

both!(fn case30_cpu_burn_held_to_cpus(who) {
    let r = exec_json_run(who, &["--cpus", "0.5", "--timeout", "30s"], &[PY, "-c", &cpu_burn(2.5)]);
    r.expect_ok();
    let backend = r.backend();
    let wall = r.get("/executionTime").as_f64().unwrap_or(0.0);
    let cpu = r.get("/cpuTime").as_f64().unwrap_or_else(|| panic!("no cpuTime:\n{}", r.describe()));
    assert!(wall >= 2000.0, "the burn ran {wall} ms:\n{}", r.describe());
    if backend == "rlimit" {
        // No CPU controller: held by CPU affinity to one whole CPU (0.5 rounds up), which the
        // sandbox may not widen; CPU time from rusage. 4 spinning threads on 2 cores would
        // use up to 2 x wall.
        assert_eq!(r.get("/limits/cpus/enforcement").as_str(), Some("affinity"), "{}", r.describe());
        assert_eq!(r.get("/cpuTimeSource").as_str(), Some("rusage"), "{}", r.describe());
        assert!(cpu > 0.2 * wall, "rusage CPU time {cpu} ms for a {wall} ms burn:\n{}", r.describe());
        assert!(cpu < 1.2 * wall, "CPU time {cpu} ms over {wall} ms wall pinned to one CPU:\n{}", r.describe());
    } else {
        assert_eq!(r.get("/limits/cpus/enforcement").as_str(), Some(backend.as_str()), "{}", r.describe());
        assert_eq!(r.get("/cpuTimeSource").as_str(), Some(backend.as_str()), "{}", r.describe());
        // 4 spinning threads on 2 cores would use up to 2 x wall; --cpus 0.5 holds it near
        // 0.5 x wall. Generous bounds: the machine is shared.
        assert!(cpu < 0.8 * wall, "CPU time {cpu} ms over {wall} ms wall under --cpus 0.5:\n{}", r.describe());
        assert!(cpu > 0.2 * wall, "CPU time {cpu} ms is too low to be the kernel's count:\n{}", r.describe());
    }
    // The pin itself, in both variants (forced to the rlimit backend): one CPU; widening it
    // is refused for the process, a child (by pid) and a thread; a child inherits the one CPU.
    let probe = exec_json_run(who, &["--cpus", "0.5", "--limits-backend", "rlimit"], &[PY, "-c", AFFINITY_PROBE]);
    assert_eq!(
        probe.expect_ok(),
        "1\nself 1\nchild 1\nthread 1\ninherited 1\n",
        "one CPU, EPERM on every widening:\n{}",
        probe.describe()
    );
});

const AFFINITY_PROBE: &str = r#"
import os, threading
print(len(os.sched_getaffinity(0)))
every = range(os.cpu_count())
def widen(label, pid):
    try:
        os.sched_setaffinity(pid, every)
        print(label, "WIDENED")
    except OSError as e:
        print(label, e.errno)
widen("self", 0)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.read(r, 1)
    os._exit(len(os.sched_getaffinity(0)))
widen("child", pid)
t = threading.Thread(target=lambda: widen("thread", 0))
t.start(); t.join()
os.write(w, b"x")
print("inherited", os.waitpid(pid, 0)[1] >> 8)
"#;

/// Whether `who`'s runs get a cgroup on this host (the auto backend).
fn r_backend_is_cgroup(who: Who) -> bool {
    expected_auto_backend(who).is_some_and(|b| b.starts_with("cgroup"))
}

/// The child cgroups under this process's own memory cgroup (where cordon creates its groups,
/// as root on a v1 host).
fn memory_cgroup_children() -> Option<BTreeSet<String>> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))?;
    let dir = std::path::Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
    Some(
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    )
}

const RUNS: usize = 200;

both!(fn case41_concurrent_runs_not_cross_wired(who) {
    let before = memory_cgroup_children();
    let handles: Vec<_> = (0..RUNS)
        .map(|i| {
            let token = format!("tok{i:03}x{}", std::process::id());
            let host = format!("h{i}");
            let c = Cordon::exec(
                who,
                &["--json", "--hostname", &host, "--timeout", "60s"],
                &["sh", "-c", &format!("echo {token} > /tmp/t; sleep 0.2; cat /tmp/t; hostname; ls -A /tmp /workspace | tr '\\n' ' '")],
            )
            .deadline(Duration::from_secs(120));
            std::thread::spawn(move || (token, host, c.run_json()))
        })
        .collect();
    let mut groups = BTreeSet::new();
    let mut host_uids = BTreeSet::new();
    for h in handles {
        let (token, host, r) = h.join().expect("a run panicked");
        assert_eq!(r.expect_ok(), format!("{token}\n{host}\n/tmp: t  /workspace: "), "cross-wired or leaked state:\n{}", r.describe());
        // Each run's cgroup is its own (named in the backend note: `cgroup v1 (cordon-PID-ID in ...`).
        let note = r.get("/limits/backendNote").as_str().unwrap_or_default().to_string();
        if let Some(name) = note.split_whitespace().find(|w| w.starts_with("(cordon-") || w.starts_with("cordon-")) {
            assert!(groups.insert(name.trim_start_matches('(').to_string()), "two runs shared the cgroup {name}");
        }
        host_uids.insert(r.get("/isolation/hostUid").as_u64().unwrap_or(0));
    }
    if r_backend_is_cgroup(who) {
        assert_eq!(groups.len(), RUNS, "every run must name its own cgroup");
    }
    // A root caller's sandboxes each run as a host uid of their own; a user's, as that user.
    let want_uids = if who == Who::Root { RUNS } else { 1 };
    assert_eq!(host_uids.len(), want_uids, "host uids of the sandboxes: {host_uids:?}");
    // No cgroup left behind (only checkable where cordon uses v1 groups under ours).
    if let Some(before) = before {
        let clean = wait_until(Duration::from_secs(10), || {
            memory_cgroup_children().is_some_and(|now| now.is_subset(&before))
        });
        assert!(clean, "cgroups left behind: {:?}", memory_cgroup_children().map(|n| &n - &before));
    }
});

// ---------------------------------------------------------------------------------------------
// Case 28, the other memory bombs: many threads, and a shared anonymous mapping touched page by
// page (exec_limits::memory_bomb_* is the single-threaded one).

const THREAD_BOMB: &str = r#"
import threading
failed = []
def hog():
    a = []
    try:
        for i in range(40):
            a.append(bytearray(10 * 1024 * 1024))
    except MemoryError:
        failed.append(1)
        raise
    print("NOT LIMITED", flush=True)
ts = [threading.Thread(target=hog) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
# As a real program would: a thread's failure is the program's.
if failed:
    raise MemoryError("%d of 8 threads could not allocate" % len(failed))
"#;

const SHARED_MMAP_BOMB: &str = r#"
import mmap, time
m = mmap.mmap(-1, 400 << 20)
for off in range(0, 400 << 20, 4096):
    m[off] = 1
    if off % (1 << 20) == 0:
        time.sleep(0.001)
print("NOT LIMITED", flush=True)
"#;

both!(fn case28_thread_and_mmap_memory_bombs(who) {
    for (name, code) in [("threads", THREAD_BOMB), ("shared mmap", SHARED_MMAP_BOMB)] {
        let r = exec_json_run(who, &["--memory", "128M", "--timeout", "60s"], &[PY, "-c", code]);
        let backend = r.backend();
        if backend.starts_with("cgroup") {
            // The cgroup counts every page of the sandbox: the kernel kills it, cordon says so.
            assert_eq!(r.status(), "memory_limit", "{name}:\n{}", r.describe());
            assert_eq!(r.code(), 137, "{name}:\n{}", r.describe());
            assert!(!r.output().contains("NOT LIMITED"), "{name}:\n{}", r.describe());
            assert_eq!(r.get("/oomKilledSource").as_str(), Some(backend.as_str()), "{name}:\n{}", r.describe());
            let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
            assert!((64 << 20..=160 << 20).contains(&used), "{name}: peak {used}:\n{}", r.describe());
        } else if name == "threads" {
            // RLIMIT_DATA stops each thread's heap (contained: no thread got its 400 MB);
            // the program fails with MemoryError, and the memory limit is inferred from it,
            // labelled so.
            assert!(!r.output().contains("NOT LIMITED"), "{name}:\n{}", r.describe());
            assert!(r.error().contains("MemoryError"), "{name}:\n{}", r.describe());
            assert_eq!((r.status(), r.code()), ("memory_limit", 137), "{name}:\n{}", r.describe());
            assert_eq!(r.get("/oomKilledSource").as_str(), Some("inferred"), "{name}:\n{}", r.describe());
        } else {
            // Without a cgroup, cordon's memory watch polls the sandbox's shared memory too.
            assert_polled_shared_mapping_kill(&r, name, 400 << 20);
        }
    }
});

/// The rlimit backend's memory watch ended the run: status memory_limit, 137, the program did
/// not get its 400 MB, and the result says the kill and the peak were polled.
fn assert_polled_memory_limit(r: &JsonRun, name: &str) {
    assert_polled_kill(r, name, 128 << 20..400 << 20);
}

/// A 400 MB shared anonymous mapping counts at its length as soon as the watch sees it (it
/// cannot tell untouched pages from pages dropped from the page tables): killed at once, with
/// the length (and the interpreter) as the peak.
fn assert_polled_shared_mapping_kill(r: &JsonRun, name: &str, length: u64) {
    // Near the length, not exactly: a sample reads maps and smaps_rollup at two instants, so
    // pages touched in between shift the sum by a few MiB (seen: 2 MiB under).
    assert_polled_kill(r, name, length - (length >> 4)..length + (64 << 20));
}

fn assert_polled_kill(r: &JsonRun, name: &str, peak: std::ops::Range<u64>) {
    assert_eq!(r.backend(), "rlimit", "{name}:\n{}", r.describe());
    assert!(
        !r.output().contains("NOT LIMITED"),
        "{name}: not contained:\n{}",
        r.describe()
    );
    assert_eq!(r.status(), "memory_limit", "{name}:\n{}", r.describe());
    assert_eq!(r.code(), 137, "{name}:\n{}", r.describe());
    assert_eq!(
        r.get("/oomKilled").as_bool(),
        Some(true),
        "{name}:\n{}",
        r.describe()
    );
    assert_eq!(
        r.get("/oomKilledSource").as_str(),
        Some("polled"),
        "{name}:\n{}",
        r.describe()
    );
    assert_eq!(
        r.get("/memoryUsedSource").as_str(),
        Some("polled"),
        "{name}:\n{}",
        r.describe()
    );
    // The peak the watch saw is what made it kill: over the limit, and (but for a shared
    // mapping, counted at its length) far from the 400 MB.
    let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!(
        peak.contains(&used),
        "{name}: polled peak {used}:\n{}",
        r.describe()
    );
    let message = r.get("/message").as_str().unwrap_or("");
    assert!(
        message.contains("memory watch") && message.contains("polled"),
        "{name}:\n{}",
        r.describe()
    );
    let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("");
    assert!(
        note.contains("polled every 20-50 ms") && note.contains("not a hard cap"),
        "{name}:\n{}",
        r.describe()
    );
}

// Case 28 under the rlimit backend (forced, so root runs it too): every kind of shared memory
// a program can fill without RLIMIT_DATA noticing.
// The bombs pause 1 ms per MB: the watch samples every 20 ms, but on this shared 2-core machine
// (both variants of a test run at once) its supervisor can be scheduled late, and an unpaced
// bomb may reach its 400 MB in that time. Containment, not the race, is under test here.

/// A memfd or, where memfd_create answers ENOSYS (under the memory watch, which cannot always
/// count memfds), an unnamed file in /dev/shm, as programs fall back to: defines `anon_fd()`.
const ANON_FD: &str = r#"
import errno, os
def anon_fd():
    try:
        return os.memfd_create("bomb")
    except OSError as e:
        if e.errno != errno.ENOSYS:
            raise
        return os.open("/dev/shm", os.O_RDWR | os.O_TMPFILE, 0o600)
"#;

/// A memfd (or its fallback) filled with write(), never mapped.
const MEMFD_BOMB: &str = r#"
import os, time
fd = anon_fd()
chunk = b"x" * (1 << 20)
for i in range(400):
    os.write(fd, chunk)
    time.sleep(0.001)
print("NOT LIMITED", flush=True)
"#;

/// SysV segments of 16 MiB, each attached and touched page by page; with DETACH, detached
/// again at once (their pages stay with the segment, mapped nowhere). Prints what the
/// segments of the IPC namespace hold at the end.
const SYSV_BOMB: &str = r#"
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
libc.shmdt.argtypes = [ctypes.c_void_p]
SEG = 16 << 20
made = 0
for i in range(25):
    sid = libc.shmget(0, SEG, 0o1000 | 0o600)
    if sid < 0:
        print("SHMGET FAILED", os.strerror(ctypes.get_errno()), "after", made >> 20, flush=True)
        raise SystemExit(3)
    addr = libc.shmat(sid, None, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        print("SHMAT FAILED", os.strerror(ctypes.get_errno()), flush=True)
        raise SystemExit(4)
    for off in range(0, SEG, 4096):
        ctypes.memset(addr + off, 1, 1)
        if off % (1 << 20) == 0:
            time.sleep(0.001)
    made += SEG
    if DETACH:
        libc.shmdt(addr)
rss = 0
for line in open("/proc/sysvipc/shm").read().splitlines()[1:]:
    rss += int(line.split()[14])
print("NOT LIMITED", made >> 20, "RESIDENT", rss >> 20, flush=True)
"#;

/// A 400 MB file in /dev/shm, mapped and touched page by page (the POSIX shm_open way).
const DEV_SHM_MAP_BOMB: &str = r#"
import mmap, os, time
fd = os.open("/dev/shm/bomb", os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 400 << 20)
m = mmap.mmap(fd, 400 << 20)
for off in range(0, 400 << 20, 4096):
    m[off] = 1
    if off % (1 << 20) == 0:
        time.sleep(0.001)
print("NOT LIMITED", flush=True)
"#;

/// 400 MB written into the file `path` (on a tmpfs: memory), paced 1 ms per MB.
fn write_bomb(path: &str) -> String {
    format!(
        r#"
import time
chunk = b"x" * (1 << 20)
with open("{path}", "wb") as f:
    for i in range(400):
        f.write(chunk)
        f.flush()
        time.sleep(0.001)
print("NOT LIMITED", flush=True)
"#
    )
}

const RLIMIT_128M: &[&str] = &[
    "--limits-backend",
    "rlimit",
    "--memory",
    "128M",
    "--timeout",
    "60s",
];

both!(fn case28_shared_memory_bombs_polled_under_rlimit(who) {
    let sysv_attached = format!("DETACH = False\n{SYSV_BOMB}");
    let (shm_write, workspace_write) = (write_bomb("/dev/shm/bomb"), write_bomb("/workspace/bomb"));
    for (name, code, extra) in [
        ("shared mmap", SHARED_MMAP_BOMB, &[][..]),
        ("memfd write", &format!("{ANON_FD}{MEMFD_BOMB}"), &["--tmp-size", "1G", "--file-size", "1G"][..]),
        // A /dev/shm as large as the bomb, so that only the memory limit can stop it.
        ("/dev/shm mmap", DEV_SHM_MAP_BOMB, &["--tmp-size", "1G", "--file-size", "1G"][..]),
        ("/dev/shm write", &shm_write, &["--tmp-size", "1G", "--file-size", "1G"][..]),
        ("/workspace write", &workspace_write, &["--file-size", "1G"][..]),
    ] {
        let mut opts = RLIMIT_128M.to_vec();
        opts.extend_from_slice(extra);
        let r = exec_json_run(who, &opts, &[PY, "-c", code]);
        if name == "shared mmap" {
            assert_polled_shared_mapping_kill(&r, name, 400 << 20);
        } else {
            assert_polled_memory_limit(&r, name);
        }
    }
    // SysV: a root caller's sandbox has kernel.shmall = the limit, so shmget may fail first
    // (ENOSPC); otherwise the watch kills. Either way the program cannot pass the limit.
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &sysv_attached]);
    assert_sysv_contained(who, &r, "SysV attached");
});

/// A SysV bomb either failed at shmget under a root caller's kernel.shmall (with at most the
/// limit made), or was killed by the watch.
fn assert_sysv_contained(who: Who, r: &JsonRun, name: &str) {
    if r.output().contains("SHMGET FAILED") {
        assert_eq!(
            who,
            Who::Root,
            "{name}: only a root caller's sandbox has kernel.shm* set:\n{}",
            r.describe()
        );
        let made: u64 = r
            .output()
            .split_whitespace()
            .last()
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX);
        assert!(
            made <= 128,
            "{name}: SysV segments of {made} MiB under a 128 MiB limit:\n{}",
            r.describe()
        );
        assert!(
            r.output().contains("No space left"),
            "{name}:\n{}",
            r.describe()
        );
        // The program exits 3; the watch may have seen its last segment plus its heap over
        // the limit first.
        assert!(
            ["runtime_error", "memory_limit"].contains(&r.status()),
            "{name}:\n{}",
            r.describe()
        );
    } else {
        assert_polled_memory_limit(r, name);
    }
}

both!(fn case28_detached_sysv_segments_are_bounded_under_rlimit(who) {
    // Segments touched and detached keep their pages, mapped by no process: the watch counts
    // them from the IPC namespace's /proc/sysvipc/shm (and a root caller's kernel.shmall may
    // stop shmget first).
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &format!("DETACH = True\n{SYSV_BOMB}")]);
    assert_sysv_contained(who, &r, "SysV detached");
});

both!(fn case28_dev_shm_is_capped_by_its_size_under_rlimit(who) {
    // /dev/shm is the sandbox's own tmpfs, as large as /tmp (64 MiB by default): a file bomb
    // there ends at ENOSPC, under the memory limit (with a larger --tmp-size, the memory watch
    // counts its files: case28_shared_memory_bombs_polled_under_rlimit).
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &write_bomb("/dev/shm/bomb")]);
    assert!(!r.output().contains("NOT LIMITED"), "{}", r.describe());
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    assert!(r.error().contains("No space left on device"), "{}", r.describe());
    assert_eq!(r.get("/limits/tmpBytes/value").as_f64(), Some((64u64 << 20) as f64), "{}", r.describe());
    assert!(r.get("/limits/tmpBytes/note").as_str().unwrap_or("").contains("/dev/shm"), "{}", r.describe());
});

both!(fn case28_sysv_sysctls_follow_the_memory_limit(who) {
    let r = exec_json_run(who, &["--memory", "128M"], &["cat", "/proc/sys/kernel/shmmax", "/proc/sys/kernel/shmall", "/proc/sys/kernel/shmmni"]);
    let out = r.expect_ok();
    if who == Who::Root {
        // init, still host root in the sandbox's IPC namespace, set them: 128 MiB, in pages.
        let page = 4096;
        assert_eq!(out, format!("{}\n{}\n4096\n", 128u64 << 20, (128u64 << 20) / page), "{}", r.describe());
    } else {
        // Only the IPC namespace's root uid may write them: the kernel's defaults stay, and the
        // rlimit backend's note says what bounds SysV shm instead.
        let shmmax: u64 = out.lines().next().and_then(|l| l.parse().ok()).unwrap_or(0);
        assert!(shmmax > 1 << 40, "{}", r.describe());
        if r.backend() == "rlimit" {
            let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("");
            assert!(note.contains("SysV shmmax/shmall unset (unprivileged)"), "{}", r.describe());
        }
    }
});

/// A shared mmap bomb that first makes itself non-dumpable, which hides its descriptors (and
/// so its memfds) from an unprivileged caller's supervisor. Mapped 4 MiB at a time: a single
/// 400 MB mapping would be over the limit at the first sample (it counts at its length).
const NON_DUMPABLE_BOMB: &str = r#"
import ctypes, mmap, time
assert ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0
maps = []
for i in range(100):
    m = mmap.mmap(-1, 4 << 20)
    for off in range(0, 4 << 20, 4096):
        m[off] = 1
        if off % (1 << 20) == 0:
            time.sleep(0.001)
    maps.append(m)
print("NOT LIMITED", flush=True)
"#;

both!(fn case28_a_process_hiding_from_the_memory_watch_fails_closed_under_rlimit(who) {
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", NON_DUMPABLE_BOMB]);
    assert!(!r.output().contains("NOT LIMITED"), "{}", r.describe());
    if who == Who::Root {
        // Root reads every process of the sandbox.
        assert_polled_memory_limit(&r, "non-dumpable");
    } else {
        // The watch cannot count what the process may hold: the run ends, and says why.
        assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
        let message = r.get("/message").as_str().unwrap_or("");
        assert!(message.contains("non-dumpable") && message.contains("killed the sandbox"), "{}", r.describe());
    }
});

/// A memfd filled past the limit by a non-dumpable process that forks and exits every few
/// milliseconds, so that no pid of it lives through two samples of the watch: each would
/// get a fresh grace for hiding its descriptors.
const PID_CYCLING_MEMFD_BOMB: &str = r#"
import ctypes, os, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    assert ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0
    fd = anon_fd()
    chunk = b"x" * (4 << 20)
    end = time.monotonic() + 3
    n = 0
    while time.monotonic() < end:
        if n < 100:
            os.write(fd, chunk)
            n += 1
        if os.fork() != 0:
            os._exit(0)
        time.sleep(0.003)
    print("NOT LIMITED", flush=True)
    os._exit(0)
os.close(w)
os.read(r, 1)
"#;

both!(fn case28_processes_taking_turns_to_hide_fail_closed_under_rlimit(who) {
    // memfd_create answers ENOSYS under the watch: the bomb falls back to /dev/shm (made as
    // large as the bomb), whose files the watch counts whoever holds them; the watch may also
    // see the descriptors hidden too often first.
    let mut opts = RLIMIT_128M.to_vec();
    opts.extend_from_slice(&["--tmp-size", "1G", "--file-size", "1G"]);
    let r = exec_json_run(who, &opts, &[PY, "-c", &format!("{ANON_FD}{PID_CYCLING_MEMFD_BOMB}")]);
    assert!(!r.output().contains("NOT LIMITED"), "{}", r.describe());
    if who == Who::Root || r.status() == "memory_limit" {
        assert_polled_memory_limit(&r, "pid-cycling memfd");
    } else {
        assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
        let message = r.get("/message").as_str().unwrap_or("");
        assert!(message.contains("non-dumpable") && message.contains("killed the sandbox"), "{}", r.describe());
    }
});

/// 40 MB of shared anonymous memory (touched by a forked child too: counted once), a 20 MB
/// memfd (or its fallback), a 16 MB SysV segment and a 10 MB file in /workspace, all touched,
/// held for a while (several polls of the watch).
const SHARED_UNDER_LIMIT: &str = r#"
import ctypes, mmap, os, time
m = mmap.mmap(-1, 40 << 20)
for off in range(0, 40 << 20, 4096):
    m[off] = 1
child = os.fork()
if child == 0:
    for off in range(0, 40 << 20, 4096):
        m[off] = 2
    time.sleep(1)
    os._exit(0)
fd = anon_fd()
os.write(fd, b"y" * (20 << 20))
libc = ctypes.CDLL(None)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
addr = libc.shmat(libc.shmget(0, 16 << 20, 0o1000 | 0o600), None, 0)
ctypes.memset(addr, 2, 16 << 20)
with open("/workspace/f", "wb") as f:
    f.write(b"z" * (10 << 20))
time.sleep(1)
os.waitpid(child, 0)
print("done", flush=True)
"#;

both!(fn case28_shared_memory_under_the_limit_is_not_killed_under_rlimit(who) {
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &format!("{ANON_FD}{SHARED_UNDER_LIMIT}")]);
    assert_eq!(r.expect_ok(), "done\n", "{}", r.describe());
    assert_eq!(r.get("/oomKilled").as_bool(), Some(false), "{}", r.describe());
    let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!(used < 128 << 20, "peak {used}:\n{}", r.describe());
});

/// The ctypes preamble of the programs that map memory themselves: libc, with the argument
/// and result types of mmap, munmap, mremap and madvise (pointers would be cut to `int`).
const LIBC_MAPS: &str = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
"#;

/// Shared anonymous mappings of 60 MiB (each under the limit; 480 MiB in all), every page
/// touched, then dropped from the page tables according to `HOW`: madvise(MADV_DONTNEED) one
/// MiB at a time as it is filled (the mapping stays), or, once filled, munmap or mremap of
/// all but its first page. Each shmem object keeps its pages, which no page table shows.
const DROPPED_PAGES_BOMB: &str = r#"
import ctypes, time
SIZE, MB = 60 << 20, 1 << 20
for i in range(8):
    # PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS
    a = libc.mmap(None, SIZE, 3, 0x01 | 0x20, -1, 0)
    assert a not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    for off in range(0, SIZE, MB):
        for p in range(off, off + MB, 4096):
            ctypes.memset(a + p, 1, 1)
        if HOW == "dontneed":
            assert libc.madvise(a + off, MB, 4) == 0
        time.sleep(0.001)
    if HOW == "munmap":
        assert libc.munmap(a + 4096, SIZE - 4096) == 0
    elif HOW == "mremap":
        assert libc.mremap(a, SIZE, 4096, 0) == a
time.sleep(0.5)
print("NOT LIMITED", flush=True)
"#;

both!(fn case28_shared_pages_dropped_from_the_page_tables_are_counted_under_rlimit(who) {
    // Pss sees only the pages in some page table: the watch counts a shared anonymous object
    // at the whole length mapped, and a mapping cut down at the length it was seen at.
    for how in ["dontneed", "munmap", "mremap"] {
        let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &format!("HOW = {how:?}\n{LIBC_MAPS}{DROPPED_PAGES_BOMB}")]);
        assert_polled_memory_limit(&r, how);
    }
});

/// A shared anonymous mapping of `SIZE` MiB of which 10 MiB are touched, held a while.
const SPARSE_SHARED_MAPPING: &str = r#"
import mmap, time
m = mmap.mmap(-1, SIZE << 20)
for off in range(0, 10 << 20, 4096):
    m[off] = 1
time.sleep(0.5)
print("done", flush=True)
"#;

both!(fn case28_a_shared_anonymous_mapping_counts_at_its_length_under_rlimit(who) {
    // Its untouched pages cannot be told from pages dropped with MADV_DONTNEED, so the watch
    // counts the length mapped, as RLIMIT_AS would: 1 GiB under a 512 MiB limit is over it,
    // 256 MiB is not.
    let opts = ["--limits-backend", "rlimit", "--memory", "512M", "--timeout", "60s"];
    let r = exec_json_run(who, &opts, &[PY, "-c", &format!("SIZE = 256\n{SPARSE_SHARED_MAPPING}")]);
    assert_eq!(r.expect_ok(), "done\n", "{}", r.describe());
    let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!((256 << 20..512 << 20).contains(&used), "peak {used}:\n{}", r.describe());
    let r = exec_json_run(who, &opts, &[PY, "-c", &format!("SIZE = 1024\n{SPARSE_SHARED_MAPPING}")]);
    assert_polled_shared_mapping_kill(&r, "1 GiB mapping", 1 << 30);
});

/// Shared anonymous mappings of 1 and 2 MiB (300 MiB in all, on `THREADS` threads), each
/// filled and then cut down to its first page at once by `HOW`: munmap of the rest, mremap
/// shrinking it, or mmap(MAP_FIXED) of inaccessible private memory over the rest. Each mapping
/// is whole for well under one sample interval; the shmem objects keep every page.
const CUT_DOWN_BOMB: &str = r#"
import ctypes, threading
PAGE = 4096
failed = []
def bomb(total):
    made, i = 0, 0
    while made < total:
        size = (1 + i % 2) << 20
        # PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS
        a = libc.mmap(None, size, 3, 0x21, -1, 0)
        if a in (None, ctypes.c_void_p(-1).value):
            failed.append(("mmap", ctypes.get_errno()))
            return
        ctypes.memset(a, 1, size)
        if HOW == "munmap":
            ok = libc.munmap(a + PAGE, size - PAGE) == 0
        elif HOW == "mremap":
            ok = libc.mremap(a, size, PAGE, 0) == a
        else:
            # MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED over all but the first page, PROT_NONE (a
            # writable private mapping would count against RLIMIT_DATA)
            ok = libc.mmap(a + PAGE, size - PAGE, 0, 0x22 | 0x10, -1, 0) == a + PAGE
        if not ok:
            failed.append((HOW, ctypes.get_errno()))
            return
        made += size
        i += 1
threads = [threading.Thread(target=bomb, args=((300 << 20) // THREADS,)) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("FAILED" if failed else "NOT LIMITED", failed, flush=True)
"#;

both!(fn case28_shared_mappings_cut_down_between_samples_are_counted_under_rlimit(who) {
    // Each mmap with MAP_SHARED waits for the supervisor, which records its length: the objects
    // count at the length they were made with however short-lived their whole mappings were.
    // Without that, the run held 300 MiB and ended ok.
    for (how, threads) in [("munmap", 1), ("mremap", 1), ("fixed", 1), ("munmap", 4)] {
        let name = format!("{how}, {threads} thread(s)");
        let code = format!("HOW = {how:?}\nTHREADS = {threads}\n{LIBC_MAPS}{CUT_DOWN_BOMB}");
        let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &code]);
        assert!(!r.output().contains("FAILED"), "{name}: a call failed:\n{}", r.describe());
        assert_polled_memory_limit(&r, &name);
    }
});

/// A 64 MiB shared anonymous mapping, filled and cut down to one page, handed down a chain
/// of processes that each fork and exit (the last one keeps the page), `ROUNDS` times: an
/// object whose holder keeps changing between the listing of the sandbox's processes and the
/// reading of their mappings. Four rounds hold 256 MiB.
const FORK_CHAIN: &str = r#"
import ctypes, os, time
OBJ, PAGE = 64 << 20, 4096
for r in range(ROUNDS):
    rd, wr = os.pipe()
    if os.fork() == 0:
        os.close(rd)
        a = libc.mmap(None, OBJ, 3, 0x21, -1, 0)
        ctypes.memset(a, 1, OBJ)
        libc.munmap(a + PAGE, OBJ - PAGE)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            if os.fork() > 0:
                os._exit(0)
        os.write(wr, b"x")
        while True:
            time.sleep(1)
    os.close(wr)
    os.read(rd, 1)
    os.close(rd)
    time.sleep(0.3)
print("NOT LIMITED", flush=True)
"#;

both!(fn case28_a_shared_object_handed_down_a_fork_chain_is_still_counted_under_rlimit(who) {
    // Each sample lists the sandbox's processes again until no new one shows up, so the object
    // is seen in every sample, and counts at the length it was made with: memory_limit. On a
    // loaded machine the chain's exiting processes may instead hide their descriptors from
    // too many samples: then the watch calls itself blind and kills the sandbox, saying so.
    // Either way the memory is not kept.
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &format!("ROUNDS = 4\n{LIBC_MAPS}{FORK_CHAIN}")]);
    if r.status() == "sandbox_error" {
        assert!(!r.output().contains("NOT LIMITED"), "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or_default().to_string();
        assert!(
            msg.contains("cordon killed the sandbox rather than run it without its memory limit"),
            "{}",
            r.describe()
        );
    } else {
        assert_polled_memory_limit(&r, "fork chain");
    }
});

both!(fn case28_dev_zero_reads_zeros_but_cannot_be_mapped_under_rlimit(who) {
    // A shared mapping of /dev/zero would make an object the watch cannot attribute (its
    // notification would show only a descriptor number): under the watch /dev/zero is
    // /dev/full, which reads the same zeros and cannot be mapped.
    let code = r#"
import errno, mmap
with open("/dev/zero", "rb") as f:
    print(f.read(8) == bytes(8))
    for flags in (mmap.MAP_SHARED, mmap.MAP_PRIVATE):
        try:
            mmap.mmap(f.fileno(), 4096, flags=flags, prot=mmap.PROT_READ)
            print("mapped")
        except OSError as e:
            print(errno.errorcode[e.errno])
"#;
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", code]);
    assert_eq!(r.expect_ok(), "True\nENODEV\nENODEV\n", "{}", r.describe());
    // Without the watch (root: a cgroup holds the memory limit), /dev/zero is the host's.
    if who == Who::Root {
        let r = exec_json_run(who, &["--memory", "128M"], &[PY, "-c", code]);
        if r.backend() != "rlimit" {
            assert_eq!(r.expect_ok(), "True\nmapped\nmapped\n", "{}", r.describe());
        }
    }
});

/// Data held in the kernel's buffers, by `PROCS` processes making `COUNT` objects each, paced:
/// unix socket pairs with their send side full (`HOW = "unix"`), UDP sockets on `lo` with
/// datagrams queued to them (`"udp"`), pipes filled (`"pipe"`), FIFOs made in /workspace and
/// filled (`"fifo"`), unix socket pairs filled by a sender that then closes (stream or
/// datagram), or connections to a listener filled and closed before it accepts them. None
/// of it is in any process's memory, and the last three are in no listed socket's either.
const KERNEL_BUFFER_BOMB: &str = r#"
import os, socket, time
def fill(s):
    s.setblocking(False)
    try:
        while True:
            s.send(b"x" * 65536)
    except BlockingIOError:
        pass
def fill_fd(fd):
    os.set_blocking(fd, False)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except BlockingIOError:
        pass
def full_pair():
    a, b = socket.socketpair()
    fill(a)
    return a, b
tx = None
def full_udp():
    global tx
    if tx is None:
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    for i in range(120):
        tx.sendto(b"x" * 1000, rx.getsockname())
    return rx
def full_pipe():
    r, w = os.pipe()
    fill_fd(w)
    return r, w
def full_fifo():
    path = "/workspace/fifo-%d-%d" % (os.getpid(), time.monotonic_ns())
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)
    fill_fd(fd)
    return fd
def sender_closed(kind):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    fill(a)
    a.close()
    return b
def empty_messages():
    # An empty message shows no length in its queue but takes its buffer.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.setblocking(False)
    try:
        while True:
            a.send(b"")
    except BlockingIOError:
        pass
    a.close()
    return b
peer = None
def connected_after():
    # Datagrams from senders since closed, then a connection to a live, listed socket.
    global peer
    if peer is None:
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        peer.bind("\0cordon-test-peer-%d" % os.getpid())
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind("\0cordon-test-rx-%d-%d" % (os.getpid(), time.monotonic_ns()))
    for i in range(10):
        tx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        tx.sendto(b"x" * 20000, rx.getsockname())
        tx.close()
    rx.connect(peer.getsockname())
    return rx
server = None
def unaccepted():
    global server
    if server is None:
        server = socket.socket(socket.AF_UNIX)
        server.bind("\0cordon-test-%d" % os.getpid())
        server.listen(4096)
    c = socket.socket(socket.AF_UNIX)
    c.connect(server.getsockname())
    fill(c)
    c.close()
    return None
make = {
    "unix": full_pair,
    "udp": full_udp,
    "pipe": full_pipe,
    "fifo": full_fifo,
    "stream sender closed": lambda: sender_closed(socket.SOCK_STREAM),
    "datagram sender closed": lambda: sender_closed(socket.SOCK_DGRAM),
    "connections not accepted": unaccepted,
    "empty messages, sender closed": empty_messages,
    "datagram socket connected after filling": connected_after,
}[HOW]
done = []
for p in range(PROCS):
    r, w = os.pipe()
    if os.fork() == 0:
        held = []
        for i in range(COUNT):
            held.append(make())
            time.sleep(PACE)
        os.write(w, b"1")
        time.sleep(5)
        os._exit(0)
    os.close(w)
    done.append(r)
if all(os.read(r, 1) == b"1" for r in done):
    print("NOT LIMITED", flush=True)
    time.sleep(1)
"#;

both!(fn case28_socket_and_pipe_buffers_count_under_rlimit(who) {
    // Without a cgroup nothing else bounds them: before the watch counted them, 16 processes
    // holding unix socket pairs kept 650 MiB of the host's memory under --memory 128M, and
    // ended ok. Now the watch dumps the sandbox's sockets (sock_diag) and counts each pipe a
    // descriptor holds at its 16-page buffer.
    // Paced (seconds per object per process), so that a sample sees the limit passed before
    // the bomb is done even on a loaded machine: containment is under test, not the race.
    for (how, procs, count, pace) in [
        ("unix", 4, 400, 0.001),
        ("udp", 4, 500, 0.001),
        ("pipe", 8, 480, 0.003),
        ("fifo", 8, 480, 0.003),
        ("stream sender closed", 4, 800, 0.002),
        // Counted at 11 send buffers each (an unconnected datagram socket's queue).
        ("datagram sender closed", 4, 800, 0.005),
        ("connections not accepted", 4, 800, 0.002),
        ("empty messages, sender closed", 4, 800, 0.002),
        // Counted at 11 datagrams of a send buffer each (any bound datagram socket).
        ("datagram socket connected after filling", 4, 800, 0.005),
    ] {
        let code =
            format!("HOW = {how:?}\nPROCS = {procs}\nCOUNT = {count}\nPACE = {pace}\n{KERNEL_BUFFER_BOMB}");
        let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &code]);
        assert_polled_memory_limit(&r, how);
        let msg = r.get("/message").as_str().unwrap_or_default().to_string();
        if how != "pipe" && how != "fifo" {
            assert!(msg.contains("of it queued on sockets"), "{how}: {}", r.describe());
        }
    }
});

/// Kernel memory no process maps, made paced by one process (`HOW`): SysV semaphore sets of
/// 32000 semaphores (2 MiB each), SysV message queues filled to their 16 KiB, or, in 6
/// processes, epoll instances each watching 450 eventfds (about 90 KB each), one every 20 ms
/// (the watch reads an epoll's items from its fdinfo, about a million a second: a program
/// making them faster outruns it, up to the kernel's own per-user bound; see README).
const KERNEL_OBJECT_BOMB: &str = r#"
import ctypes, errno, os, select, time
libc = ctypes.CDLL(None, use_errno=True)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 8000)]
def sem_sets():
    for i in range(200):
        assert libc.semget(0, 32000, 0o1600) >= 0, errno.errorcode[ctypes.get_errno()]
        time.sleep(0.002)
def msg_queues():
    m = Msg(1, b"x" * 8000)
    for i in range(25000):
        q = libc.msgget(0, 0o1600)
        assert q >= 0, errno.errorcode[ctypes.get_errno()]
        while libc.msgsnd(q, ctypes.byref(m), 8000, 0o4000) == 0:
            pass
        if i % 16 == 0:
            time.sleep(0.001)
def epolls():
    done = []
    for p in range(6):
        r, w = os.pipe()
        if os.fork() == 0:
            fds = [os.eventfd(0) for i in range(450)]
            eps = []
            for e in range(450):
                ep = select.epoll()
                for f in fds:
                    ep.register(f, select.EPOLLIN)
                eps.append(ep)
                time.sleep(0.02)
            os.write(w, b"1")
            time.sleep(5)
            os._exit(0)
        os.close(w)
        done.append(r)
    assert all(os.read(r, 1) == b"1" for r in done)
def proc_buffers():
    # Each open /proc file keeps the buffer its last read filled; an epoll's fdinfo is one
    # record as long as its items (800: 64 KiB), read whole through 900 descriptors in each
    # of 20 processes: 1.1 GiB of the kernel's, in no process's memory.
    done = []
    for p in range(20):
        r, w = os.pipe()
        if os.fork() == 0:
            base = os.eventfd(0)
            ep = select.epoll()
            dups = [os.dup(base) for i in range(800)]
            for d in dups:
                ep.register(d, select.EPOLLIN)
            # The items stay while the eventfd does: their descriptors are free again.
            for d in dups:
                os.close(d)
            held = []
            for i in range(900):
                f = os.open(f"/proc/self/fdinfo/{ep.fileno()}", os.O_RDONLY)
                while os.read(f, 1 << 16):
                    pass
                held.append(f)
            os.write(w, b"1")
            time.sleep(5)
            os._exit(0)
        os.close(w)
        done.append(r)
    assert all(os.read(r, 1) == b"1" for r in done)
def page_tables():
    # A read-only private region is not data (RLIMIT_DATA): one byte read every 2 MiB maps
    # the zero page, no resident memory, and makes a page table each.
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    a = libc.mmap(None, 1 << 40, 1, 0x02 | 0x20 | 0x4000, -1, 0)
    assert a not in (None, ctypes.c_void_p(-1).value), errno.errorcode[ctypes.get_errno()]
    for i in range(100000):
        ctypes.c_char.from_address(a + i * (2 << 20)).value
        if i % 64 == 0:
            time.sleep(0.001)
{"sem": sem_sets, "msg": msg_queues, "epoll": epolls, "proc buffers": proc_buffers, "page tables": page_tables}[HOW]()
print("NOT LIMITED", flush=True)
time.sleep(1)
"#;

// The buffer of an open /proc file outlives what filled it: an fdinfo read whole while its
// epoll lived keeps its 128 KiB after the epoll is closed or its process exits, when the file
// can no longer be read to size it. The run is ended as one the watch cannot measure, even
// where samples sized the files before (the holder may have read them again after the epoll
// grew, just before it went). The 600 buffers (75 MiB) are opened slowly, so that samples see
// them while the epoll lives, and stay under the limit alone; the 64 MiB the program fills
// once the epoll is gone would pass it were they counted. Before: each such file counted at
// two pages (3,800 held 491 MB while the watch saw 63 MB), then at the size a sample saw;
// and a closed epoll whose fdinfo path was looked up once since (the `stat` below) left the
// holder's links reading "… (deleted)", which the watch did not take for fdinfo files at
// all: two pages each, NOT LIMITED.
const GONE_FDINFO: &str = r#"
import os, select, time
r, w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    base = os.eventfd(0)
    ep = select.epoll()
    dups = [os.dup(base) for i in range(900)]
    for d in dups:
        ep.register(d, select.EPOLLIN)
    for d in dups:
        os.close(d)
    os.write(w, b"%8d" % ep.fileno())
    os.read(go_r, 1)
    if HOW == "exit":
        os._exit(0)
    ep.close()
    os.write(w, b"c")
    time.sleep(60)
    os._exit(0)
epfd = int(os.read(r, 8))
path = f"/proc/{pid}/fdinfo/{epfd}"
held = []
for i in range(600):
    f = os.open(path, os.O_RDONLY)
    while os.read(f, 1 << 16):
        pass
    held.append(f)
    if i % 100 == 99:
        time.sleep(0.2)
time.sleep(0.3)
os.write(go_w, b"x")
if HOW == "exit":
    os.waitpid(pid, 0)
else:
    os.read(r, 1)
    try:
        os.stat(path)
    except OSError:
        pass
print("epoll gone", flush=True)
blob = b"\x01" * (64 << 20)
time.sleep(5)
print("NOT LIMITED", flush=True)
"#;

both!(fn case28_proc_buffers_outlive_what_filled_them_under_rlimit(who) {
    for how in ["exit", "close"] {
        let code = format!("HOW = {how:?}\n{GONE_FDINFO}");
        let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &code]);
        assert!(!r.output().contains("NOT LIMITED"), "{how}: not contained:\n{}", r.describe());
        // Under the limit while the epoll lives; ended once it is gone, within two samples.
        assert!(r.output().contains("epoll gone"), "{how}: ended before the epoll went:\n{}", r.describe());
        assert_eq!((r.status(), r.code()), ("sandbox_error", 125), "{how}:\n{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("cannot be sized") && msg.contains("fdinfo"), "{how}:\n{}", r.describe());
    }
});

both!(fn case28_kernel_objects_count_under_rlimit(who) {
    // Before the watch counted them, 200 semaphore sets held 405 MiB, 2 million epoll items
    // 381 MiB, page tables 391 MiB (VmPTE), the buffers of open /proc files 1.1 GiB, under
    // --memory 128M, and ended ok. Semaphores and queues are read from
    // /proc/sysvipc/{sem,msg} of the sandbox's IPC namespace, epoll items from each instance's
    // fdinfo. (SysV limits would stop a root caller's sandbox first if set; they are not.)
    for how in ["sem", "msg", "epoll", "proc buffers", "page tables"] {
        let code = format!("HOW = {how:?}\n{KERNEL_OBJECT_BOMB}");
        let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &code]);
        // Reading a million epoll items' fdinfo costs about a second of the supervisor's
        // CPU: the sample may pass its budget before the sum passes the limit, which ends
        // the run too, as sandbox_error saying so.
        let costly = r.status() == "sandbox_error"
            && r.get("/message").as_str().unwrap_or("").contains("of CPU in one sample");
        if how == "epoll" && costly {
            assert_eq!(r.backend(), "rlimit", "{how}:\n{}", r.describe());
            assert_eq!(r.code(), 125, "{how}:\n{}", r.describe());
            assert!(
                r.get("/message").as_str().unwrap_or("").contains("cannot be enforced"),
                "{how}:\n{}",
                r.describe()
            );
            continue;
        }
        assert_polled_memory_limit(&r, how);
    }
});

// Kernel memory made without a page: mappings (alternating mprotect of one region splits it
// into 32,700 per process, 8 MiB of the kernel's) count at MAPPING_BYTES each, and a sample
// that costs the watch more than a second of CPU ends the run; Landlock rulesets (4 MiB each
// with a rule per port, none of it visible) cannot be made under the watch. Before: 60
// processes held 767 MiB of mappings, and 500 rulesets 2.3 GiB, under --memory 128M, `ok`.
const MAPPING_BOMB: &str = r#"
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
print("landlock", libc.syscall(444, None, 0, 1), ctypes.get_errno(), flush=True)
P, N = 4096, 32700
for _ in range(16):
    if os.fork() == 0:
        base = libc.mmap(None, 2 * N * P, 0, 0x22, -1, 0)
        for i in range(N):
            libc.mprotect(base + 2 * i * P, P, 1)
        time.sleep(30)
        os._exit(0)
time.sleep(30)
print("NOT LIMITED")
"#;

both!(fn case28_mappings_count_and_landlock_rulesets_are_refused_under_rlimit(who) {
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", MAPPING_BOMB]);
    assert_eq!(r.backend(), "rlimit", "{}", r.describe());
    let refused = format!("landlock -1 {}\n", libc::ENOSYS);
    assert!(r.output().starts_with(&refused), "{}", r.describe());
    let costly = r.status() == "sandbox_error" && r.get("/message").as_str().unwrap_or("").contains("of CPU in one sample");
    assert!(r.status() == "memory_limit" || costly, "{}", r.describe());
    assert!(!r.output().contains("NOT LIMITED"), "{}", r.describe());
});

both!(fn case28_sockets_and_pipes_within_the_limit_run_under_rlimit(who) {
    // What the watch can count works as usual: pipes to a child, a unix socket pair, UDP over
    // lo (TCP is Landlock's to refuse with the network off), epoll. What it could not count
    // is refused: a pipe's buffer cannot grow (EPERM, as past fs.pipe-max-size), a socket no
    // sock_diag dump of the watch lists (SCTP, through SOCK_SEQPACKET) cannot be made, and
    // inotify answers ENOSYS (its event queue shows nowhere), sendfile EINVAL (it hands pages
    // over by reference), which shutil.copyfile and Node's fs.copyFileSync fall back from.
    let code = r#"
import errno, fcntl, os, socket, subprocess
out = subprocess.run(["sh", "-c", "echo out; echo err >&2"], capture_output=True)
print(out.stdout, out.stderr)
a, b = socket.socketpair()
a.sendall(b"x" * 100000)
got = 0
while got < 100000:
    got += len(b.recv(1 << 20))
print(got)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
u.sendto(b"ping", u.getsockname())
print(u.recv(16))
r, w = os.pipe()
try:
    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    print("resized")
except OSError as e:
    print(errno.errorcode[e.errno])
try:
    socket.socket(socket.AF_INET, socket.SOCK_SEQPACKET)
    print("made")
except OSError as e:
    print(errno.errorcode[e.errno])
import ctypes, select
libc = ctypes.CDLL(None, use_errno=True)
print(libc.inotify_init1(0), errno.errorcode[ctypes.get_errno()])
ep = select.epoll()
ep.register(r, select.EPOLLIN)
print(ep.poll(0))
server = socket.socket(socket.AF_UNIX)
server.bind("\0cordon-waiting")
server.listen(4096)
clients = []
for i in range(400):
    c = socket.socket(socket.AF_UNIX)
    c.connect("\0cordon-waiting")
    clients.append(c)
print(len(clients), "waiting")
import shutil
with open("/tmp/a", "w") as f:
    f.write("copied")
shutil.copyfile("/tmp/a", "/tmp/b")
print(open("/tmp/b").read())
try:
    os.sendfile(w, os.open("/tmp/a", os.O_RDONLY), 0, 6)
    print("sent")
except OSError as e:
    print(errno.errorcode[e.errno])
"#;
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", code]);
    assert_eq!(
        r.expect_ok(),
        "b'out\\n' b'err\\n'\n100000\nb'ping'\nEPERM\nEPERM\n-1 ENOSYS\n[]\n400 waiting\ncopied\nEINVAL\n",
        "{}",
        r.describe()
    );
    let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!(used < 64 << 20, "memoryUsed {used}: {}", r.describe());
    // Node's fs.copyFileSync tries copy_file_range, then sendfile, and copies by read and
    // write after EINVAL (not after ENOSYS).
    let node = "const fs = require('fs'); fs.copyFileSync('/usr/bin/env', '/tmp/env'); console.log(fs.statSync('/tmp/env').size === fs.statSync('/usr/bin/env').size)";
    let r = exec_json_run(who, RLIMIT_128M, &["/usr/bin/node", "-e", node]);
    assert_eq!(r.expect_ok(), "true\n", "{}", r.describe());
    let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("");
    // Its own network namespace: every socket it can make is counted, and the note says
    // which it cannot make.
    assert!(note.contains("EAFNOSUPPORT: sockets but unix, TCP, UDP"), "{}", r.describe());
    assert!(!note.contains("--net host") && !note.contains("not counted"), "{}", r.describe());
    // Sharing the host's network namespace, the sandbox's sockets are among the host's and
    // cannot be counted: refused, unless the caller accepts it, which the note then says.
    let mut opts = RLIMIT_128M.to_vec();
    opts.extend(["--net", "host"]);
    let r = exec_json_run(who, &opts, &["sh", "-c", "echo ran"]);
    assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
    assert_eq!(r.output(), "", "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default().to_string();
    assert!(msg.contains("--allow-degraded socket-memory"), "{}", r.describe());
    // The warning about the shared network is for a run that goes ahead, not a refused one.
    assert!(!r.finished.stderr_str().contains("WARNING: --net host"), "{}", r.describe());
    opts.extend(["--allow-degraded", "socket-memory"]);
    let r = exec_json_run(who, &opts, &["true"]);
    r.expect_ok();
    assert!(r.finished.stderr_str().contains("WARNING: --net host"), "{}", r.describe());
    let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("");
    assert!(note.contains("--net host: socket buffers not counted"), "{}", r.describe());
});

/// Processes whose main thread exits (the `exit` system call, not `exit_group`) while a
/// worker thread holds `KIND` memory: /proc/PID then shows no memory for them.
const EXITED_MAIN_THREAD: &str = r#"
import ctypes, mmap, os, threading, time
def worker(n):
    time.sleep(0.3)
    if KIND == "shared":
        m = mmap.mmap(-1, n << 20)
        for i in range(0, len(m), 4096):
            m[i] = 1
    else:
        b = bytearray(n << 20)
    time.sleep(3)
    os.write(1, b"NOT LIMITED\n")
    os._exit(0)
pids = []
for k in range(PROCS):
    pid = os.fork()
    if pid == 0:
        threading.Thread(target=worker, args=(300 // PROCS,)).start()
        time.sleep(0.1)
        ctypes.CDLL(None).syscall(60, 0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
"#;

both!(fn case28_memory_held_by_threads_of_an_exited_main_thread_is_counted_under_rlimit(who) {
    // The watch reads such a process through a live thread's /proc/PID/task/TID. Without
    // that, 300 MiB of shared memory in one process, or 100 MiB private in each of three (each
    // under RLIMIT_DATA), ran to the end under --memory 128M.
    for (kind, procs) in [("shared", 1), ("private", 3)] {
        let code = format!("KIND = {kind:?}\nPROCS = {procs}\n{EXITED_MAIN_THREAD}");
        let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &code]);
        assert_polled_memory_limit(&r, &format!("{kind}, {procs} process(es)"));
    }
});

/// An ordinary program that maps, shrinks and frees memory all the time, under the limit:
/// shared anonymous buffers of 1-2 MiB filled, shrunk to half with mremap, checked and
/// unmapped; private buffers (Python's, through malloc: mmap and munmap) filled and freed;
/// a private mapping partly replaced with MAP_FIXED by a shared one. Prints a checksum of
/// what it read back.
const MAPPING_CHURN: &str = r#"
import ctypes
total = 0
for i in range(N):
    size = (1 + i % 2) << 20
    a = libc.mmap(None, size, 3, 0x21, -1, 0)
    assert a not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    ctypes.memset(a, i % 251, size)
    assert libc.mremap(a, size, size // 2, 0) == a, ctypes.get_errno()
    total += sum(ctypes.string_at(a + size // 2 - 16, 16))
    assert libc.munmap(a, size // 2) == 0, ctypes.get_errno()
    b = bytearray(size)
    b[-1] = i % 256
    total += b[-1]
    del b
    p = libc.mmap(None, size, 3, 0x22, -1, 0)
    assert libc.mmap(p + size // 2, size // 2, 3, 0x21 | 0x10, -1, 0) == p + size // 2
    ctypes.memset(p, 7, size)
    total += ctypes.string_at(p + size - 1, 1)[0]
    assert libc.munmap(p, size) == 0
print(total, flush=True)
"#;

both!(fn case28_programs_that_map_and_unmap_a_lot_are_not_killed_under_rlimit(who) {
    // Every shared mapping's creation waits for the supervisor's answer: the program must still
    // get its right results, and buffers made and freed all the time must not be charged as if
    // kept (each iteration holds at most 2 MiB at once).
    const N: u64 = 600;
    let want: u64 = (0..N).map(|i| 16 * (i % 251) + i % 256 + 7).sum();
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", &format!("N = {N}\n{LIBC_MAPS}{MAPPING_CHURN}")]);
    assert_eq!(r.expect_ok(), format!("{want}\n"), "{}", r.describe());
    assert_eq!(r.get("/oomKilled").as_bool(), Some(false), "{}", r.describe());
    let used = r.get("/memoryUsed").as_u64().unwrap_or(0);
    assert!(used < 128 << 20, "peak {used}:\n{}", r.describe());
});

/// Which of memfd_create and memfd_secret the sandbox may call.
const MEMFD_PROBE: &str = r#"
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for name, nr, arg in (("memfd_create", 319, b"x"), ("memfd_secret", 447, 0)):
    r = libc.syscall(nr, arg, 0)
    print(name, "ENOSYS" if r < 0 and ctypes.get_errno() == errno.ENOSYS else "available")
"#;

/// Anonymous files of 60 MiB (memfds, or their fallback), each filled with write(), then
/// kept by `HOW`: a one-page mapping made with ctypes (Python's mmap would keep a
/// descriptor) after which its descriptor is closed, or its descriptor in flight in a unix
/// socket's queue (sent with SCM_RIGHTS, never received, closed by the sender).
const FD_LESS_BOMB: &str = r#"
import ctypes, os, socket, time
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(8):
    fd = anon_fd()
    for j in range(60):
        os.write(fd, b"x" * (1 << 20))
        time.sleep(0.001)
    if HOW == "mapped":
        p = libc.mmap(None, 4096, 3, 0x01, fd, 0)
        assert p not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    else:
        socket.send_fds(a, [b"m"], [fd])
    os.close(fd)
time.sleep(0.5)
print("NOT LIMITED", flush=True)
"#;

both!(fn case28_memfds_are_unavailable_under_rlimit(who) {
    // The watch cannot count a memfd kept only by a partial mapping or by a descriptor in
    // flight: under it, memfd_create and memfd_secret answer ENOSYS, and the result says so.
    let r = exec_json_run(who, RLIMIT_128M, &[PY, "-c", MEMFD_PROBE]);
    assert_eq!(r.expect_ok(), "memfd_create ENOSYS\nmemfd_secret ENOSYS\n", "{}", r.describe());
    // (+cpu-pin: the default --cpus 1 is held by CPU affinity without a cgroup.)
    assert_eq!(r.get("/isolation/seccomp").as_str(), Some("default+memory-watch+cpu-pin"), "{}", r.describe());
    let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("");
    assert!(note.contains("ENOSYS: memfd_create, memfd_secret, "), "{}", r.describe());
    // Only there: a run whose memory a cgroup holds keeps them.
    let r = exec_json_run(who, &["--memory", "128M"], &[PY, "-c", MEMFD_PROBE]);
    let out = r.expect_ok();
    if r.backend() == "rlimit" {
        assert_eq!(out, "memfd_create ENOSYS\nmemfd_secret ENOSYS\n", "{}", r.describe());
    } else {
        assert!(out.starts_with("memfd_create available\n"), "{}", r.describe());
        assert_eq!(r.get("/isolation/seccomp").as_str(), Some("default"), "{}", r.describe());
    }
    // A program that falls back to /dev/shm (made as large as the bomb) is counted there,
    // however it keeps its files.
    for how in ["mapped", "in flight"] {
        let mut opts = RLIMIT_128M.to_vec();
        opts.extend_from_slice(&["--tmp-size", "1G", "--file-size", "1G"]);
        let r = exec_json_run(who, &opts, &[PY, "-c", &format!("HOW = {how:?}\n{LIBC_MAPS}{ANON_FD}{FD_LESS_BOMB}")]);
        assert_polled_memory_limit(&r, how);
    }
});

// ---------------------------------------------------------------------------------------------
// Case 34, the floods the output limit must hold without cordon's own memory growing with
// them: a gigabyte on one line, of NUL bytes and of invalid UTF-8.

/// Runs argv[1:] and prints, on stderr after it ends, the largest RSS of any process it
/// waited for (cordon itself: the sandbox's own processes here are `head` and `tr`).
const MAXRSS: &str = r#"
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:])
print("MAXRSS", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(code)
"#;

both!(fn case34_one_line_floods_stay_bounded(who) {
    for (name, script) in [
        ("NUL bytes", "head -c 1000000000 /dev/zero"),
        ("invalid UTF-8", "head -c 1000000000 /dev/zero | tr '\\0' '\\377'"),
    ] {
        let cordon = Cordon::exec(who, &["--json", "--timeout", "60s"], &["sh", "-c", script]);
        let mut argv: Vec<std::ffi::OsString> = vec!["/usr/bin/python3".into(), "-c".into(), MAXRSS.into()];
        argv.extend(cordon.argv());
        let start = std::time::Instant::now();
        let child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the RSS wrapper");
        let f = wait_with_deadline(child, start, Duration::from_secs(60), argv.clone());
        let v: serde_json::Value = serde_json::from_slice(&f.stdout)
            .unwrap_or_else(|e| panic!("{name}: no JSON result ({e}):\n{}", f.describe()));
        assert_eq!(v["status"], "output_limit", "{name}:\n{}", f.describe());
        assert_eq!(f.code, 137, "{name}:\n{}", f.describe());
        assert_eq!(v["outputTruncated"], true, "{name}:\n{}", f.describe());
        assert_eq!(v["outputLossy"], name == "invalid UTF-8", "{name}:\n{}", f.describe());
        let out = v["output"].as_str().unwrap_or("");
        let expect = if name == "NUL bytes" { '\0' } else { '\u{fffd}' };
        assert!(out.chars().take(1000).all(|c| c == expect), "{name}: output starts {:?}", &out[..out.len().min(40)]);
        // The default limit keeps 10 MiB: cordon may hold that, its text and the encoder's
        // buffer, not a gigabyte, nor the several copies a naive encoding would make.
        let rss_kib: u64 = f.stderr_str().lines().find_map(|l| l.strip_prefix("MAXRSS ")?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name}: no MAXRSS line:\n{}", f.describe()));
        assert!(rss_kib < 64 * 1024, "{name}: cordon's peak RSS {rss_kib} KiB for a 10 MiB output limit:\n{}", f.describe());
    }
});

/// Python that goes down 20 directories of 250-letter names, deeper than a page of path:
/// the kernel cannot give the memory watch a descriptor's name there (readlink
/// ENAMETOOLONG).
const INTO_A_DEEP_DIRECTORY: &str = "\
import os, time
for i in range(20):
    name = chr(ord('a') + i) * 250
    os.mkdir(name)
    os.chdir(name)
";

both!(fn case28_a_descriptor_on_a_deep_path_does_not_blind_the_memory_watch(who) {
    // A directory held open there is no pipe or memfd, so the watch goes on and the run is
    // the program's, not a sandbox_error.
    let code = format!("{INTO_A_DEEP_DIRECTORY}\
fd = os.open('.', os.O_RDONLY)
assert len(os.getcwd()) > 4096
time.sleep(1.5)
print('deep')
");
    let r = exec_json_run(who, &["--memory", "128M", "--limits-backend", "rlimit", "--timeout", "30s"], &[PY, "-c", &code]);
    assert_eq!(r.expect_ok(), "deep\n", "{}", r.describe());
    assert_eq!(r.get("/limits/memoryBytes/enforcement").as_str(), Some("rlimit"), "{}", r.describe());
});

both!(fn case28_deep_fifos_count_under_rlimit(who) {
    // FIFOs too deep for readlink still count (their mount, read from fdinfo and mountinfo,
    // is the workspace's tmpfs): 2600 pipe buffers are 162 MiB, over the limit. Reading that
    // many descriptors may pass a sample's CPU budget on a slow machine (the emulated guest of
    // scripts/vm-test skips `under_rlimit` tests): the watch then ends the run, saying so.
    let fifos = format!("{INTO_A_DEEP_DIRECTORY}\
fds = []
for i in range(2600):
    os.mkfifo(f'f{{i}}')
    fds.append(os.open(f'f{{i}}', os.O_RDWR | os.O_NONBLOCK))
time.sleep(5)
print('NOT LIMITED')
");
    let mut opts = RLIMIT_128M.to_vec();
    opts.extend_from_slice(&["--open-files", "4096", "--workspace-inodes", "8192"]);
    let r = exec_json_run(who, &opts, &[PY, "-c", &fifos]);
    let costly = r.status() == "sandbox_error"
        && r.get("/message").as_str().unwrap_or("").contains("of CPU in one sample");
    if costly {
        assert_eq!(r.code(), 125, "{}", r.describe());
    } else {
        assert_polled_memory_limit(&r, "deep FIFOs");
    }
});

/// A TCP socket on the sandbox's loopback: made, then listened on and connected to.
const LOOPBACK_TCP: &str = r#"
import errno, socket
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    print("socket OK")
except OSError as e:
    print("socket", name(e))
    raise SystemExit
s.listen(1)
c = socket.socket()
try:
    c.connect(s.getsockname()); print("connect OK")
except OSError as e:
    print("connect", name(e))
"#;

both!(fn case28_tcp_under_the_memory_watch_is_refused_by_landlock_or_seccomp(who) {
    // A TCP connection whose peer reset keeps its unread data out of the sock_diag dumps the
    // watch reads. Landlock (ABI 4+, Linux 6.7) refuses the connect; on older kernels (the
    // cgroup v2 guest of scripts/vm-test runs Linux 6.1) TCP sockets cannot be made at all
    // under the watch with the network off, and the note says so.
    let opts = ["--limits-backend", "rlimit", "--memory", "128M"];
    let r = exec_json_run(who, &opts, &[PY, "-c", LOOPBACK_TCP]);
    let out = r.expect_ok();
    let abi = r.get("/isolation/landlockAbi").as_u64().unwrap_or(0);
    let seccomp = r.get("/isolation/seccomp").as_str().unwrap_or("").to_string();
    let note = r.get("/limits/memoryBytes/note").as_str().unwrap_or("").to_string();
    if abi >= 4 {
        assert_eq!(out, "socket OK\nconnect EACCES\n", "{}", r.describe());
        assert!(!seccomp.contains("no-tcp") && !note.contains("EACCES"), "{}", r.describe());
    } else {
        assert_eq!(out, "socket EACCES\n", "{}", r.describe());
        assert!(seccomp.starts_with("default+memory-watch+no-tcp"), "{}", r.describe());
        assert!(note.contains("EACCES: TCP sockets"), "{}", r.describe());
    }
    // With a cgroup holding the memory (root), TCP is Landlock's alone.
    if who == Who::Root {
        let r = exec_json_run(who, &["--memory", "128M"], &[PY, "-c", LOOPBACK_TCP]);
        if r.backend() != "rlimit" {
            assert!(!r.get("/isolation/seccomp").as_str().unwrap_or("").contains("no-tcp"), "{}", r.describe());
            assert!(r.expect_ok().starts_with("socket OK\n"), "{}", r.describe());
        }
    }
});

/// Fills UDP sockets on `lo` with datagrams nobody reads, watching the host's UDP memory
/// (`/proc/net/sockstat`, in pages: the kernel's one count for every network namespace)
/// and printing the most it rose by. Stops at 512 MiB, so that a run that is not held does
/// not keep the host's whole `net.ipv4.udp_mem` for long.
const UDP_FLOOD: &str = r#"
import socket, time
def udp_bytes():
    for l in open("/proc/net/sockstat"):
        if l.startswith("UDP:"):
            f = l.split()
            return int(f[f.index("mem") + 1]) * 4096
base = udp_bytes()
peak = 0
held = []
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setblocking(False)
for i in range(400):
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    rx.bind(("127.0.0.1", 0))
    held.append(rx)
    for n in range(200):
        try: tx.sendto(b"x" * 60000, rx.getsockname())
        except (BlockingIOError, OSError): break
    peak = max(peak, udp_bytes() - base)
    if peak > 512 << 20:
        break
print("peak", peak, flush=True)
"#;

// Socket buffers are memory the sandbox holds: under --memory 64M, datagrams queued on its
// UDP sockets on `lo` stay near 64 MiB, whichever backend holds the limit. cgroup v1 leaves
// them out of memory.limit_in_bytes: a sandbox held 2.2 GB there, the host's whole
// net.ipv4.udp_mem (so the host's own UDP dropped), with status ok. Now cordon sets
// memory.kmem.tcp.limit_in_bytes too; cgroup v2 charges them to memory.max; the memory watch
// counts them.
both!(fn udp_buffers_are_held_to_the_memory_limit(who) {
    let r = exec_json_run(who, &["--memory", "64M", "--timeout", "60s"], &[PY, "-c", UDP_FLOOD]);
    let status = r.status().to_string();
    assert!(status == "ok" || status == "memory_limit", "{}", r.describe());
    let peak: Option<u64> = r
        .output()
        .lines()
        .find_map(|l| l.strip_prefix("peak ")?.trim().parse().ok());
    match peak {
        Some(p) => assert!(p <= 256 << 20, "{p} bytes of UDP buffers under --memory 64M:\n{}", r.describe()),
        // Killed before it printed: the limit held it.
        None => assert_eq!(status, "memory_limit", "{}", r.describe()),
    }
});

//! Hostile-input battery (issue 4), /proc, kill semantics, mounts, limits, IPC and the kernel
//! surface: cases 13, 15 (the sysrq-trigger write), 16, 17 (raw clone), 18, 19, 21 (foreign
//! ABIs), 22 (terminal injection), 24, 25 (the rest of the denied syscalls) and 26. Each test
//! is a real attack program run through `cordon exec`, as root and as the unprivileged user.
//! See tests/hostile/README.md for the case → test map.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

fn expect(r: &JsonRun, got: &BTreeMap<String, String>, label: &str, want: &[&str]) {
    let v = got.get(label).map(String::as_str).unwrap_or("<missing>");
    assert!(
        want.contains(&v),
        "{label}: expected one of {want:?}, got {v:?}:\n{}",
        r.describe()
    );
}

// ---------------------------------------------------------------------------------------------
// Case 13: /proc/self/exe, the cordon binary (pid 1 is cordon's init), ptrace of pid 1.

const PROC_EXE: &str = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def t(label, f):
    try:
        f(); print(label, "OK")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
def sc(label, ret):
    print(label, "OK" if ret != -1 else errno.errorcode.get(ctypes.get_errno(), "?"))
t("self-exe-w", lambda: os.open("/proc/self/exe", os.O_WRONLY))
t("self-exe-rw", lambda: os.open("/proc/self/exe", os.O_RDWR))
t("init-exe-w", lambda: os.open("/proc/1/exe", os.O_WRONLY))
t("init-exe-rw", lambda: os.open("/proc/1/exe", os.O_RDWR))
t("init-exe-r", lambda: os.open("/proc/1/exe", os.O_RDONLY))
t("init-mem-r", lambda: os.read(os.open("/proc/1/mem", os.O_RDONLY), 1))
t("init-environ", lambda: os.read(os.open("/proc/1/environ", os.O_RDONLY), 1))
t("init-root", lambda: os.listdir("/proc/1/root/"))
t("python-w", lambda: os.open("/usr/bin/python3", os.O_WRONLY))
sc("ptrace-attach-1", libc.ptrace(16, 1, None, None))
sc("ptrace-seize-1", libc.ptrace(0x4206, 1, None, None))
iov = (ctypes.c_char * 8)()
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = IoVec(ctypes.cast(iov, ctypes.c_void_p), 8)
remote = IoVec(0x400000, 8)
sc("pvr-1", libc.process_vm_readv(1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
sc("pvw-1", libc.process_vm_writev(1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
sc("pidfd-getfd-1", libc.syscall(438, libc.syscall(434, 1, 0), 0, 0))
# Every mapping of init (the cordon binary among them) and of this process, opened for writing.
for who in ("1", "self"):
    try:
        names = os.listdir("/proc/%s/map_files" % who)
    except OSError as e:
        print("map-files-" + who, errno.errorcode.get(e.errno, e.errno)); continue
    seen = set()
    for n in names:
        for flag in (os.O_WRONLY, os.O_RDWR):
            try:
                os.close(os.open("/proc/%s/map_files/%s" % (who, n), flag)); seen.add("OK")
            except OSError as e:
                seen.add(errno.errorcode.get(e.errno, str(e.errno)))
    print("map-files-" + who, ",".join(sorted(seen)) if names else "empty")
"#;

both!(fn case13_proc_exe_and_init_untouchable(who) {
    // The user variant runs a copy of cordon owned by the caller, as a user's own install
    // would be: the sandbox's uid maps to the caller's, so file modes alone would let it
    // write the binary through /proc/1/exe; only the other layers stand in the way.
    let own = shared_tempdir();
    let bin = match who {
        Who::Root => cordon_bin().to_path_buf(),
        Who::User => {
            use std::os::unix::fs::PermissionsExt;
            let p = own.path().join("cordon");
            std::fs::copy(cordon_bin(), &p).expect("copy the cordon binary");
            std::os::unix::fs::chown(&p, Some(who.caller_uid()), Some(who.caller_gid()))
                .expect("chown the copy to the caller");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            p
        }
    };
    let before = sha256_hex(&std::fs::read(&bin).expect("read the cordon binary"));
    let r = Cordon::exec(who, &["--json"], &[PY, "-c", PROC_EXE]).bin(&bin).run_json();
    r.expect_ok();
    let got = results(r.output());
    // /usr is a read-only overlay: EROFS, before Landlock (EACCES) or ETXTBSY would answer.
    for label in ["self-exe-w", "self-exe-rw"] {
        expect(&r, &got, label, &["EROFS", "EACCES", "ETXTBSY", "EPERM"]);
    }
    for label in ["init-exe-w", "init-exe-rw", "init-exe-r", "init-mem-r", "init-environ", "init-root"] {
        expect(&r, &got, label, &["EACCES", "EPERM"]);
    }
    expect(&r, &got, "python-w", &["EROFS", "EACCES"]);
    for label in ["ptrace-attach-1", "ptrace-seize-1", "pvr-1", "pvw-1", "pidfd-getfd-1"] {
        expect(&r, &got, label, &["EPERM", "EACCES", "ENOSYS", "EBADF"]);
    }
    // map_files needs CAP_SYS_ADMIN over the host's user namespace (and init's, ptrace access).
    expect(&r, &got, "map-files-1", &["EACCES", "EPERM"]);
    expect(&r, &got, "map-files-self", &["EPERM", "EACCES"]);
    assert!(!got.values().any(|v| v.split(',').any(|x| x == "OK")), "something succeeded:\n{}", r.describe());
    let after = sha256_hex(&std::fs::read(&bin).expect("read the cordon binary"));
    assert_eq!(after, before, "the cordon binary {} changed:\n{}", bin.display(), r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 16: `kill -9 -1` kills only the sandbox's own processes.

both!(fn case16_kill_minus_one_stays_inside(who) {
    let m = marker(who, 1601);
    // A host process of the same caller (root, or the test user) that must survive.
    let mut host = match who {
        Who::Root => Command::new("sleep").arg(&m).stdin(Stdio::null()).spawn().unwrap(),
        Who::User => {
            let u = test_user().expect("test user");
            Command::new("setpriv")
                .args([format!("--reuid={}", u.uid), format!("--regid={}", u.gid), "--clear-groups".into()])
                .args(["--", "sleep", &m])
                .stdin(Stdio::null())
                .spawn()
                .unwrap()
        }
    };
    assert!(wait_until(Duration::from_secs(5), || !procs_matching(&m).is_empty()), "host sleeper did not start");
    let r = exec_json_run(
        who,
        &["--timeout", "20s"],
        &["sh", "-c", "sleep 1000 & sleep 0.3; kill -9 -1; echo rc=$?; wait; echo shell-survived"],
    );
    let host_alive = host.try_wait().unwrap().is_none();
    let _ = host.kill();
    let _ = host.wait();
    assert!(host_alive, "kill -9 -1 in the sandbox killed a host process of the caller:\n{}", r.describe());
    assert_eq!(r.expect_ok(), "rc=0\nshell-survived\n", "{}", r.describe());
    assert!(r.elapsed() < Duration::from_secs(10), "the sandbox sleeper was not killed:\n{}", r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 18 and 19: mount, remount / rw, bind over the root, cgroup mount + release_agent,
// the new mount API, unmasking /proc; no writable cgroupfs inside.

const MOUNTS: &str = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384
def sc(label, ret):
    print(label, "OK" if ret != -1 else errno.errorcode.get(ctypes.get_errno(), "?")); ctypes.set_errno(0)
os.makedirs("/tmp/cg", exist_ok=True)
sc("remount-root-rw", libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None))
sc("remount-usr-rw", libc.mount(None, b"/usr", None, MS_REMOUNT | MS_BIND, None))
sc("bind-over-root", libc.mount(b"/workspace", b"/", None, MS_BIND | MS_REC, None))
sc("bind-over-etc", libc.mount(b"/workspace", b"/etc", None, MS_BIND, None))
sc("cgroup-v1", libc.mount(b"cgroup", b"/tmp/cg", b"cgroup", 0, b"memory"))
sc("cgroup-v2", libc.mount(b"cgroup2", b"/tmp/cg", b"cgroup2", 0, None))
sc("proc-again", libc.mount(b"proc", b"/tmp/cg", b"proc", 0, None))
sc("sysfs", libc.mount(b"sysfs", b"/tmp/cg", b"sysfs", 0, None))
sc("umount-keys-mask", libc.umount2(b"/proc/keys", 2))
sc("umount-proc-sys", libc.umount2(b"/proc/sys", 2))
sc("open_tree", libc.syscall(428, -100, b"/workspace", 1))
sc("fsopen", libc.syscall(430, b"tmpfs", 0))
sc("fspick", libc.syscall(433, -100, b"/", 0))
sc("mount_setattr", libc.syscall(442, -100, b"/", 0, None, 0))
sc("pivot_root", libc.syscall(155, b"/tmp", b"/tmp"))
sc("chroot", libc.chroot(b"/tmp"))
# No cgroupfs got mounted, so there is no release_agent to write: /tmp/cg is a plain directory.
print("cg-is-mount", os.path.ismount("/tmp/cg"))
try:
    open("/new-file", "w"); print("root-still-ro OK")
except OSError as e:
    print("root-still-ro", errno.errorcode.get(e.errno, e.errno))
cg = [l for l in open("/proc/self/mountinfo") if " cgroup" in l.split(" - ")[1][:8]]
print("cgroup-mounts", len(cg))
print("sys-fs-cgroup", os.path.exists("/sys/fs/cgroup"))
print("self-cgroup", open("/proc/self/cgroup").read().strip().replace("\n", "|"))
"#;

both!(fn case18_19_mounts_and_cgroupfs_denied(who) {
    let r = py_ok(who, MOUNTS);
    let got = results(r.output());
    for label in [
        "remount-root-rw", "remount-usr-rw", "bind-over-root", "bind-over-etc", "cgroup-v1",
        "cgroup-v2", "proc-again", "sysfs", "umount-keys-mask", "umount-proc-sys", "open_tree",
        "fsopen", "fspick", "mount_setattr", "pivot_root", "chroot",
    ] {
        expect(&r, &got, label, &["EPERM"]);
    }
    expect(&r, &got, "cg-is-mount", &["False"]);
    expect(&r, &got, "root-still-ro", &["EROFS"]);
    expect(&r, &got, "cgroup-mounts", &["0"]);
    expect(&r, &got, "sys-fs-cgroup", &["False"]);
    // A fresh cgroup namespace: the sandbox sees only its own root, never the host's paths.
    let own = got.get("self-cgroup").cloned().unwrap_or_default();
    assert!(
        own.split('|').all(|l| l.ends_with(":/")),
        "/proc/self/cgroup must show only the namespace root:\n{}",
        r.describe()
    );
});

// ---------------------------------------------------------------------------------------------
// Case 25, the calls not probed elsewhere (tests_live.rs and exec_isolation.rs cover the rest).
// An EPERM proves the seccomp rule only where the kernel itself would answer something else:
// the arguments are chosen so that it would (what an unprivileged caller gets from Linux 6.18
// without the filter is noted on each line; ENOSYS where the kernel lacks the feature).

const DENIED: &str = r#"
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.personality.argtypes = [ctypes.c_ulong]
def sc(label, ret):
    print(label, "OK" if ret != -1 else errno.errorcode.get(ctypes.get_errno(), "?")); ctypes.set_errno(0)
sc("add_key", libc.syscall(248, b"user", b"cordon", b"secret", 6, -3))   # a key id
sc("keyctl-join", libc.syscall(250, 1, b"cordon"))                       # a keyring id
sc("request_key", libc.syscall(249, b"user", b"cordon-none", None, 0))   # ENOKEY
sc("vsock", libc.socket(40, 1, 0))                                       # fd, or EAFNOSUPPORT
sc("perf_event_open", libc.syscall(298, None, 0, -1, -1, 0))             # EFAULT (attr NULL)
sc("userfaultfd", libc.syscall(323, 1))                                  # fd (UFFD_USER_MODE_ONLY)
sc("open_by_handle_at", libc.syscall(304, -100, None, 0))                # EFAULT (handle NULL)
sc("name_to_handle_at", libc.syscall(303, -1, b"", None, None, 0))       # ENOENT
sc("setns", libc.syscall(308, 0, 0))                                     # EINVAL (fd 0 is a pipe)
sc("process_vm_readv", libc.syscall(310, 1, None, 0, None, 0, 0))        # 0 (no iovec)
sc("bpf", libc.syscall(321, 9999, None, 0))                              # EINVAL (no such command)
sc("iopl", libc.syscall(172, 4))                                         # EINVAL (level > 3)
sc("ioperm", libc.syscall(173, 0, 0, 0))                                 # EINVAL (no ports)
sc("modify_ldt", libc.syscall(154, 99, None, 0))                         # ENOSYS (no such func)
sc("clock_settime", libc.syscall(227, 9999, None))                       # EINVAL (no such clock)
sc("quotactl", libc.syscall(179, 0, None, 0, None))                      # ENODEV / EFAULT
sc("personality-read-implies-exec", libc.personality(0x0400000))         # the old persona
sc("personality-addr-no-randomize", libc.personality(0x0040000))         # the old persona
# These check the capability first, so EPERM is also the kernel's own answer here (and
# kexec_load, init_module are ENOSYS on a kernel without kexec or modules):
sc("kexec_load", libc.syscall(246, 0, 0, None, 0))
sc("init_module", libc.syscall(175, None, 0, b""))
sc("acct", libc.acct(None))
sc("syslog", libc.syscall(103, 3, None, 0))
# Not a seccomp rule: the sandbox's own UTS namespace, and no CAP_SYS_ADMIN over it.
sc("sethostname", libc.sethostname(b"x", 1))
# Allowed: the query and PER_LINUX (what glibc and setarch -R ask for), outside the rule.
print("personality-query", libc.personality(0xffffffff))
print("personality-linux", libc.personality(0))
"#;

both!(fn case25_more_dangerous_syscalls_denied(who) {
    let r = py_ok(who, DENIED);
    let mut got = results(r.output());
    expect(&r, &got, "personality-query", &["0"]);
    expect(&r, &got, "personality-linux", &["0"]);
    got.remove("personality-query");
    got.remove("personality-linux");
    assert_eq!(got.len(), 23, "{}", r.describe());
    for (label, v) in &got {
        assert_eq!(v, "EPERM", "{label} must be denied with EPERM:\n{}", r.describe());
    }
});

// ---------------------------------------------------------------------------------------------
// Case 24: two concurrent sandboxes cannot talk.

/// Sandbox A: creates SysV shm/msg/sem objects with a fixed key, a POSIX message queue, an
/// abstract socket, and holds them until its stdin is closed. The queue is created but cannot
/// be opened: Landlock refuses the open of a file on the mqueue filesystem, which lies under
/// none of its rules (EACCES); O_EXCL then shows it exists.
const IPC_A: &str = r#"
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def name(): return errno.errorcode.get(ctypes.get_errno(), "?")
key = int(sys.argv[1])
print("shm", libc.shmget(key, 4096, 0o1666) >= 0)
print("msg", libc.msgget(key, 0o1666) >= 0)
print("sem", libc.semget(key, 1, 0o1666) >= 0)
mq = b"/" + sys.argv[2].encode()
print("mq-create", "OK" if libc.mq_open(mq, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0 else name())
print("mq-exists", "NO" if libc.mq_open(mq, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None) >= 0 else name())
s = socket.socket(socket.AF_UNIX); s.bind("\0" + sys.argv[2]); s.listen(1)
print("abstract", True)
print("ready", flush=True)
sys.stdin.read()
print("done")
"#;

/// Sandbox B, started once A is ready and while A waits: looks for A's objects.
const IPC_B: &str = r#"
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def name(): return errno.errorcode.get(ctypes.get_errno(), "?")
key = int(sys.argv[1])
print("shm", "FOUND" if libc.shmget(key, 0, 0) >= 0 else name())
print("msg", "FOUND" if libc.msgget(key, 0) >= 0 else name())
print("sem", "FOUND" if libc.semget(key, 0, 0) >= 0 else name())
print("mq", "FOUND" if libc.mq_open(b"/" + sys.argv[2].encode(), os.O_RDWR) >= 0 else name())
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + sys.argv[2]); print("abstract FOUND")
except OSError as e:
    print("abstract", errno.errorcode.get(e.errno, e.errno))
"#;

both!(fn case24_concurrent_sandboxes_cannot_talk_ipc(who) {
    let key = (std::process::id() % 100_000 + 0xC0_0000).to_string();
    let name = format!("cordon-ipc-{key}-{who:?}");
    let mut a = Cordon::exec(who, &[] as &[&str], &[PY, "-c", IPC_A, &key, &name]).hold();
    a.wait_for_line("ready");
    let rb = exec_json_run(who, &[] as &[&str], &[PY, "-c", IPC_B, &key, &name]);
    let fa = a.finish();
    assert_eq!(fa.code, 0, "{}", fa.describe());
    let a_out = fa.stdout_str();
    let a_got = results(&a_out);
    for label in ["shm", "msg", "sem", "abstract"] {
        assert_eq!(a_got.get(label).map(String::as_str), Some("True"), "{label}:\n{}", fa.describe());
    }
    assert!(
        ["OK", "EACCES"].contains(&a_got.get("mq-create").map_or("", String::as_str)),
        "{}",
        fa.describe()
    );
    assert_eq!(a_got.get("mq-exists").map(String::as_str), Some("EEXIST"), "{}", fa.describe());
    assert!(a_out.ends_with("ready\ndone\n"), "A did not wait for B:\n{}", fa.describe());
    // B: ENOENT, where a shared namespace would answer EACCES (the queue exists).
    let got = results(rb.expect_ok());
    for label in ["shm", "msg", "sem", "mq"] {
        expect(&rb, &got, label, &["ENOENT"]);
    }
    expect(&rb, &got, "abstract", &["ECONNREFUSED"]);
});

/// Sandbox A: takes an exclusive flock on a read-only file both sandboxes share and holds it
/// until its stdin is closed.
const FLOCK_A: &str = r#"
import fcntl, sys
f = open("/usr/bin/python3", "rb")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"#;

/// Sandbox B, started while A holds its lock: a conflict is one bit received from A.
const FLOCK_B: &str = r#"
import fcntl
f = open("/usr/bin/python3", "rb")
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print("free")
except BlockingIOError:
    print("busy")
"#;

// A lock on a file every sandbox can read is a lock on the sandbox's own overlay inode
// (`fs::overlay_ro`), not on the host's: neither another sandbox nor the host sees it.
both!(fn case24_concurrent_sandboxes_cannot_talk_flock(who) {
    let mut a = Cordon::exec(who, &[] as &[&str], &[PY, "-c", FLOCK_A]).hold();
    a.wait_for_line("held");
    // The host, too: a host process flocking the same file must not be blocked by a sandbox.
    // A shared lock: it conflicts with the sandbox's exclusive one, not with another test's
    // probe running at the same time.
    let host = Command::new("flock")
        .args(["-n", "-s", "/usr/bin/python3", "true"])
        .status()
        .unwrap();
    let rb = Cordon::exec(who, &["--json"], &[PY, "-c", FLOCK_B]).run_json();
    let fa = a.finish();
    assert_eq!((fa.code, fa.stdout_str().as_str()), (0, "held\n"), "{}", fa.describe());
    assert_eq!(
        rb.expect_ok(),
        "free\n",
        "sandbox B saw sandbox A's lock:\n{}",
        rb.describe()
    );
    assert!(
        host.success(),
        "a sandbox's flock blocked a host process (flock -n failed)"
    );
});

// Inside one sandbox, locks still work: two open files of the same path conflict.
both!(fn case24_locks_still_work_inside_one_sandbox(who) {
    let code = r#"
import fcntl
a = open("/usr/bin/python3", "rb"); b = open("/usr/bin/python3", "rb")
fcntl.flock(a, fcntl.LOCK_EX)
try:
    fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB); print("not exclusive")
except BlockingIOError:
    print("exclusive")
"#;
    let r = Cordon::exec(who, &["--json"], &[PY, "-c", code]).run_json();
    assert_eq!(r.expect_ok(), "exclusive\n", "{}", r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 26: Landlock is really enforced where the mount and the file modes would allow a write.

const LANDLOCK: &str = r#"
import errno, os
def t(label, f):
    try:
        f(); print(label, "OK")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
# procfs is mounted read-write and these files belong to the process itself (mode 0644/0666):
# only Landlock stands between the program and the write.
print("proc-mount-rw", " rw," in [l for l in open("/proc/self/mountinfo") if " /proc " in l][0])
print("comm-owner-writable", oct(os.stat("/proc/self/comm").st_mode & 0o200))
t("proc-self-comm", lambda: open("/proc/self/comm", "w").write("x"))
t("proc-self-attr", lambda: open("/proc/self/attr/current", "w").write("x"))
t("proc-self-oom", lambda: open("/proc/self/oom_score_adj", "w").write("500"))
t("proc-self-setgroups", lambda: open("/proc/self/setgroups", "w").write("allow"))
t("devpts-mkdir", lambda: os.mkdir("/dev/pts/x"))
# The allow-list: these must work.
t("dev-shm", lambda: open("/dev/shm/x", "w").write("x"))
t("dev-null", lambda: open("/dev/null", "w").write("x"))
t("workspace", lambda: open("/workspace/x", "w").write("x"))
"#;

both!(fn case26_landlock_denies_where_the_mount_allows(who) {
    let r = py_ok(who, LANDLOCK);
    let got = results(r.output());
    expect(&r, &got, "proc-mount-rw", &["True"]);
    expect(&r, &got, "comm-owner-writable", &["0o200"]);
    for label in ["proc-self-comm", "proc-self-attr", "proc-self-oom"] {
        expect(&r, &got, label, &["EACCES"]);
    }
    expect(&r, &got, "proc-self-setgroups", &["EACCES", "EPERM"]);
    expect(&r, &got, "devpts-mkdir", &["EACCES", "EPERM"]);
    for label in ["dev-shm", "dev-null", "workspace"] {
        expect(&r, &got, label, &["OK"]);
    }
    assert_eq!(r.get("/isolation/landlock").as_str(), Some("enforced"), "{}", r.describe());
});

// Landlock's TCP rules hold on the sandbox's own loopback too: a listener may bind an
// ephemeral port (listen autobinds, which Landlock does not see), but nothing in the sandbox
// can connect to it, neither with connect(2) nor with a TCP Fast Open send (which connects
// without calling connect and so passes Landlock; seccomp refuses MSG_FASTOPEN with
// EOPNOTSUPP, which Python names ENOTSUP, the same number on Linux).
const TCP_LOOPBACK: &str = r#"
import errno, socket
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
l = socket.socket(); l.listen(8); port = l.getsockname()[1]; l.setblocking(False)
print("listen", "OK" if port else "no port")
c = socket.socket()
try: c.connect(("127.0.0.1", port)); print("connect OK")
except OSError as e: print("connect", name(e))
for label, flags in (("fastopen", socket.MSG_FASTOPEN), ("fastopen-dontwait", socket.MSG_FASTOPEN | socket.MSG_DONTWAIT)):
    f = socket.socket()
    try: f.sendto(b"x", flags, ("127.0.0.1", port)); print(label, "OK")
    except OSError as e: print(label, name(e))
try: l.accept(); print("accept OK")
except OSError as e: print("accept", name(e))
"#;

both!(fn case26_tcp_on_the_sandbox_loopback_cannot_connect(who) {
    let r = py_ok(who, TCP_LOOPBACK);
    let got = results(r.output());
    expect(&r, &got, "listen", &["OK"]);
    expect(&r, &got, "connect", &["EACCES"]);
    expect(&r, &got, "fastopen", &["EOPNOTSUPP", "ENOTSUP"]);
    expect(&r, &got, "fastopen-dontwait", &["EOPNOTSUPP", "ENOTSUP"]);
    expect(&r, &got, "accept", &["EAGAIN"]);
});

// Kernel surface and per-user budgets that reach past the sandbox: inotify (its instances are
// charged to the caller's per-user count on the host, and a watch on a device node bound
// from the host saw the host's activity), socket families and protocols past Landlock's
// reach (MPTCP connected where TCP was refused), line disciplines, another process's limits
// (init's), and the caller's budgets of queued signals and message-queue bytes.
const KERNEL_REACH: &str = r#"
import ctypes, errno, fcntl, os, resource, signal, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
def name(e): return errno.errorcode.get(e, str(e))
r = libc.inotify_init1(0)
print("inotify", "OK" if r >= 0 else name(ctypes.get_errno()))
for label, args in (("mptcp", (socket.AF_INET, socket.SOCK_STREAM, 262)),
                    ("sctp", (socket.AF_INET, socket.SOCK_SEQPACKET, 0)),
                    ("can", (29, socket.SOCK_RAW, 1)),
                    ("tcp", (socket.AF_INET, socket.SOCK_STREAM, 0))):
    try: socket.socket(*args).close(); print(label, "OK")
    except OSError as e: print(label, name(e.errno))
try: resource.prlimit(1, resource.RLIMIT_NOFILE, (0, 0)); print("prlimit-init OK")
except OSError as e: print("prlimit-init", name(e.errno))
print("prlimit-read-init", "OK" if resource.prlimit(1, resource.RLIMIT_NOFILE)[1] > 0 else "zero")
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512)); print("setrlimit-own OK")
m = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
try: fcntl.ioctl(m, 0x5423, struct.pack("i", 0)); print("tiocsetd OK")
except OSError as e: print("tiocsetd", name(e.errno))
print("sigpending-limit", resource.getrlimit(resource.RLIMIT_SIGPENDING)[0])
print("msgqueue-limit", resource.getrlimit(resource.RLIMIT_MSGQUEUE)[0])
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
queued = 0
while queued < 100000 and libc.sigqueue(os.getpid(), signal.SIGRTMIN, None) == 0:
    queued += 1
print("queued", queued, name(ctypes.get_errno()))
# Core dumps (a piped core_pattern's helper runs as host root, outside the sandbox), real-time
# priority, and host-wide pools (AIO contexts, huge pages) stay out of reach.
print("core-limit", *resource.getrlimit(resource.RLIMIT_CORE))
for label, v in (("core-zero", (0, 0)), ("core-same", (1, 1))):
    try: resource.setrlimit(resource.RLIMIT_CORE, v); print(label, "OK")
    except ValueError: print(label, "EPERM")  # Python's word for EPERM from setrlimit
    except OSError as e: print(label, name(e.errno))
print("rtprio-limit", *resource.getrlimit(resource.RLIMIT_RTPRIO))
print("nice-limit", *resource.getrlimit(resource.RLIMIT_NICE))
ctx = ctypes.c_ulong(0)
print("io_setup", "OK" if libc.syscall(206, 1, ctypes.byref(ctx)) == 0 else name(ctypes.get_errno()))
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
a = libc.mmap(None, 2 << 20, 3, 0x22 | 0x40000, -1, 0)
print("map-hugetlb", "OK" if a not in (None, ctypes.c_void_p(-1).value) else name(ctypes.get_errno()))
print("shm-hugetlb", "OK" if libc.shmget(0, 2 << 20, 0o600 | 0o1000 | 0x800) >= 0 else name(ctypes.get_errno()))
print("memfd-hugetlb", "OK" if libc.syscall(319, b"h", 4) >= 0 else name(ctypes.get_errno()))
# cordon's init (pid 1) runs as the program's uid: its priority is not the program's to set.
for label, call in (("nice-init", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19)),
                    ("nice-user", lambda: os.setpriority(os.PRIO_USER, 0, 19)),
                    ("sched-idle-init", lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))),
                    ("affinity-init", lambda: os.sched_setaffinity(1, {0})),
                    ("nice-own", lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))):
    try: call(); print(label, "OK")
    except OSError as e: print(label, name(e.errno))
# lsm_set_self_attr with no attribute: EINVAL from the kernel, EPERM from the policy.
print("lsm_set_self_attr", "OK" if libc.syscall(460, 0, None, 0, 0) == 0 else name(ctypes.get_errno()))
# Kernel memory no limit counts: POSIX ACLs on the sandbox's tmpfs files (every setxattr),
# TCP MD5 and TCP-AO keys; and IPv6 flow labels, a host-wide table. TCP_NODELAY still works.
open("/workspace/x", "w").close()
for label, attr in (("acl", "system.posix_acl_access"), ("xattr-user", "user.x")):
    try: os.setxattr("/workspace/x", attr, b"\x02\0\0\0"); print(label, "OK")
    except OSError as e: print(label, name(e.errno))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
for label, opt in (("tcp-md5", 14), ("tcp-md5-ext", 32), ("tcp-ao", 38), ("tcp-nodelay", 1)):
    try: t.setsockopt(6, opt, b"\x01" + b"\0" * 215 if opt != 1 else 1); print(label, "OK")
    except OSError as e: print(label, name(e.errno))
try: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).setsockopt(41, 32, b"\0" * 32); print("flowlabel OK")
except OSError as e: print("flowlabel", name(e.errno))
for label, family in (("dccp", socket.AF_INET), ("dccp6", socket.AF_INET6)):
    try: socket.socket(family, 6).close(); print(label, "OK")
    except OSError as e: print(label, name(e.errno))
"#;

both!(fn kernel_reach_past_the_sandbox_is_refused(who) {
    let r = py_ok(who, KERNEL_REACH);
    let got = results(r.output());
    expect(&r, &got, "inotify", &["ENOSYS"]);
    for label in ["mptcp", "sctp", "can"] {
        expect(&r, &got, label, &["EPERM"]);
    }
    expect(&r, &got, "tcp", &["OK"]);
    expect(&r, &got, "prlimit-init", &["EPERM"]);
    expect(&r, &got, "prlimit-read-init", &["OK"]);
    expect(&r, &got, "setrlimit-own", &["OK"]);
    expect(&r, &got, "tiocsetd", &["EPERM"]);
    expect(&r, &got, "sigpending-limit", &["1024"]);
    expect(&r, &got, "msgqueue-limit", &["131072"]);
    // At most the sandbox's own budget is queued (a few may be pending elsewhere in it).
    let queued = got.get("queued").map(String::as_str).unwrap_or("");
    let n: u64 = queued.split(' ').next().unwrap_or("").parse().unwrap_or(u64::MAX);
    assert!((900..=1024).contains(&n) && queued.ends_with("EAGAIN"), "queued {queued}:\n{}", r.describe());
    expect(&r, &got, "core-limit", &["1 1"]);
    assert!(
        r.get("/isolation/coreDumps").as_str().unwrap_or("").starts_with("none (RLIMIT_CORE 1"),
        "{}",
        r.describe()
    );
    expect(&r, &got, "core-zero", &["EPERM"]);
    expect(&r, &got, "core-same", &["EPERM"]);
    expect(&r, &got, "rtprio-limit", &["0 0"]);
    expect(&r, &got, "nice-limit", &["0 0"]);
    expect(&r, &got, "io_setup", &["ENOSYS"]);
    expect(&r, &got, "nice-own", &["OK"]);
    for label in ["acl", "xattr-user"] {
        expect(&r, &got, label, &["EOPNOTSUPP", "ENOTSUP"]); // one value, two names
    }
    for label in ["tcp-md5", "tcp-md5-ext", "tcp-ao", "flowlabel"] {
        expect(&r, &got, label, &["ENOPROTOOPT"]);
    }
    expect(&r, &got, "tcp-nodelay", &["OK"]);
    for label in ["map-hugetlb", "shm-hugetlb", "dccp", "dccp6", "lsm_set_self_attr", "nice-init", "nice-user", "sched-idle-init", "affinity-init"] {
        expect(&r, &got, label, &["EPERM"]);
    }
    // Under the memory watch (no cgroup) every memfd_create answers ENOSYS first.
    expect(&r, &got, "memfd-hugetlb", &["EPERM", "ENOSYS"]);
});

// ---------------------------------------------------------------------------------------------
// Case 21: system calls through another ABI (i386 `int 0x80`, x32 numbers) kill the process.
// The filter's guard (src/security/seccomp/compile.rs) returns KILL_PROCESS for both, before
// any rule: the i386 and x32 tables are not what the rules describe.

/// i386 getpid through `int 0x80` from a page written, then made executable (W^X).
const INT80: &str = r#"
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax, 20 (i386 getpid); int 0x80; ret
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
page.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
assert libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) == 0, ctypes.get_errno()
print("calling", flush=True)
print("int80-getpid returned", ctypes.CFUNCTYPE(ctypes.c_int)(addr)(), flush=True)
"#;

/// x32 getpid: `__X32_SYSCALL_BIT | 39` (a kernel without x32 would answer ENOSYS).
const X32: &str = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("calling", flush=True)
r = libc.syscall(0x40000000 | 39)
print("x32-getpid returned", r, ctypes.get_errno(), flush=True)
"#;

fn assert_killed_by_sigsys(r: &JsonRun) {
    assert_eq!(r.status(), "signaled", "{}", r.describe());
    assert_eq!(r.get("/signal").as_i64(), Some(31), "{}", r.describe());
    assert_eq!(
        r.get("/signalName").as_str(),
        Some("SIGSYS"),
        "{}",
        r.describe()
    );
    assert_eq!(r.code(), 128 + 31, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(
        msg.contains("SIGSYS"),
        "the message must name SIGSYS: {msg:?}\n{}",
        r.describe()
    );
    // The line before the call made it out, the one after it never ran.
    assert_eq!(
        r.output(),
        "calling\n",
        "the process outlived the call:\n{}",
        r.describe()
    );
}

both!(fn case21_i386_int80_kills_the_process(who) {
    assert_killed_by_sigsys(&exec_json_run(who, &[] as &[&str], &[PY, "-c", INT80]));
});

both!(fn case21_x32_syscall_number_kills_the_process(who) {
    assert_killed_by_sigsys(&exec_json_run(who, &[] as &[&str], &[PY, "-c", X32]));
});

// ---------------------------------------------------------------------------------------------
// Case 22: TIOCSTI and TIOCLINUX, with and without bit 32 set in the request, on a terminal
// that is the caller's controlling tty (so the kernel itself would let TIOCSTI through: the
// request is an `unsigned int`, the upper half ignored). fds 0-2 are pipes under cordon, so
// the program makes its own pty: a child opens /dev/pts/N as a new session's first tty.

const PTY_INJECT: &str = r#"
import ctypes, errno, fcntl, os, struct, termios, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
libc.ioctl.restype = ctypes.c_int
def name(e): return errno.errorcode.get(e, str(e))
m = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
print("grantpt", libc.grantpt(m), "unlockpt", libc.unlockpt(m), flush=True)
libc.ptsname.restype = ctypes.c_char_p
pts = libc.ptsname(m).decode()
pid = os.fork()
if pid == 0:
    os.setsid()
    s = os.open(pts, os.O_RDWR)  # a session leader's first tty: its controlling terminal
    try: os.close(os.open("/dev/tty", os.O_RDWR)); print("ctty", True, flush=True)
    except OSError as e: print("ctty", name(e.errno), flush=True)
    a = termios.tcgetattr(s); a[3] &= ~termios.ICANON; termios.tcsetattr(s, termios.TCSANOW, a)
    for label, req in (("tiocsti", 0x5412), ("tiocsti-hi", 0x5412 | 1 << 32),
                       ("tioclinux", 0x541C), ("tioclinux-hi", 0x541C | 1 << 32)):
        ctypes.set_errno(0)
        r = libc.ioctl(s, req, b"x")
        print(label, "OK" if r != -1 else name(ctypes.get_errno()), flush=True)
    time.sleep(0.2)
    queued = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]
    print("slave-queued", queued, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
os.set_blocking(m, False)
try: print("master-read", repr(os.read(m, 100)))
except OSError as e: print("master-read", name(e.errno))
"#;

both!(fn case22_tiocsti_on_a_controlling_tty_is_denied(who) {
    let r = py_ok(who, PTY_INJECT);
    let got = results(r.output());
    expect(&r, &got, "grantpt", &["0 unlockpt 0"]);
    // The premise: the kernel alone would accept TIOCSTI here.
    expect(&r, &got, "ctty", &["True"]);
    for label in ["tiocsti", "tiocsti-hi", "tioclinux", "tioclinux-hi"] {
        expect(&r, &got, label, &["EPERM"]);
    }
    expect(&r, &got, "slave-queued", &["0"]);
    // Nothing was echoed back to the master either (EAGAIN: empty; EIO: the slave closed).
    expect(&r, &got, "master-read", &["EAGAIN", "EIO"]);
});

// ---------------------------------------------------------------------------------------------
// Case 17: a nested user namespace through the raw clone(2) system call (glibc's clone()
// wrapper and unshare are tested in exec_isolation.rs, clone3 answers ENOSYS).

const RAW_CLONE: &str = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SIGCHLD, CLONE_NEWUSER = 17, 0x10000000
def clone(label, flags):
    ctypes.set_errno(0)
    r = libc.syscall(56, ctypes.c_ulong(flags), 0, 0, 0, 0)
    if r == 0:
        os._exit(0)  # a child: the clone went through; leave at once
    if r > 0:
        os.waitpid(r, 0)
        print(label, "OK", flush=True)
    else:
        print(label, errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
clone("clone-plain", SIGCHLD)
clone("clone-newuser", CLONE_NEWUSER | SIGCHLD)
clone("clone-newuser-hi", (1 << 32) | CLONE_NEWUSER | SIGCHLD)
"#;

both!(fn case17_raw_clone_newuser_is_denied(who) {
    let r = py_ok(who, RAW_CLONE);
    let got = results(r.output());
    // The raw call itself works: only the flag is refused.
    expect(&r, &got, "clone-plain", &["OK"]);
    expect(&r, &got, "clone-newuser", &["EPERM"]);
    expect(&r, &got, "clone-newuser-hi", &["EPERM"]);
});

// ---------------------------------------------------------------------------------------------
// Case 19 under either limits backend: the sandbox cannot raise its own limits. The rlimit
// backend's limits are the sandbox's hard limits; raising one needs CAP_SYS_RESOURCE in the
// host's user namespace, which the sandbox never has.

const RAISE_RLIMITS: &str = r#"
import errno, resource as R
for name in ("NPROC", "DATA", "AS", "FSIZE", "CPU", "NOFILE"):
    res = getattr(R, "RLIMIT_" + name)
    soft, hard = R.getrlimit(res)
    if hard == R.RLIM_INFINITY:
        # Nothing lies above infinity: lower the hard limit, then try to take it back.
        hard = 1 << 40
        soft = hard if soft == R.RLIM_INFINITY else min(soft, hard)
        R.setrlimit(res, (soft, hard))
        print(name + "-limit", "lowered")
    else:
        print(name + "-limit", "set")
    try:
        R.setrlimit(res, (soft, hard + 1)); print(name, "RAISED")
    except ValueError as e:  # CPython's ValueError for EPERM
        print(name, "EPERM" if "not allowed to raise" in str(e) else repr(str(e)))
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
    now = R.getrlimit(res)[1]
    print(name + "-hard", "unchanged" if now == hard else now)
# The file-size limit still holds (CPython ignores SIGXFSZ, so the write fails with EFBIG).
soft, hard = R.getrlimit(R.RLIMIT_FSIZE)
print("fsize", soft, hard)
try:
    with open("/workspace/big", "wb") as f:
        f.write(b"x" * (hard + 4096))
    print("fsize-write OK")
except OSError as e:
    print("fsize-write", errno.errorcode.get(e.errno, e.errno))
import os
print("fsize-file", os.path.getsize("/workspace/big"))
"#;

both!(fn case19_the_sandbox_cannot_raise_its_own_limits(who) {
    let limits = ["--cpu-time", "20s", "--memory", "256M", "--pids", "64", "--file-size", "1M", "--open-files", "256"];
    for forced in [None, Some("rlimit")] {
        let mut opts: Vec<&str> = limits.to_vec();
        if let Some(b) = forced {
            opts.extend(["--limits-backend", b]);
        }
        let r = exec_json_run(who, &opts, &[PY, "-c", RAISE_RLIMITS]);
        let got = results(r.expect_ok());
        let rlimit = r.backend() == "rlimit";
        assert!(forced.is_none() || rlimit, "{}", r.describe());
        for name in ["NPROC", "DATA", "AS", "FSIZE", "CPU", "NOFILE"] {
            expect(&r, &got, name, &["EPERM"]);
            expect(&r, &got, &format!("{name}-hard"), &["unchanged"]);
        }
        // The limits cordon sets are there to be raised in the first place.
        let mut set = vec!["FSIZE", "CPU", "NOFILE"];
        if rlimit {
            set.extend(["NPROC", "DATA"]);
        }
        for name in set {
            expect(&r, &got, &format!("{name}-limit"), &["set"]);
        }
        expect(&r, &got, "fsize", &["1048576 1048576"]);
        expect(&r, &got, "fsize-write", &["EFBIG"]);
        expect(&r, &got, "fsize-file", &["1048576"]);
    }
});

// ---------------------------------------------------------------------------------------------
// Case 15: a write to /proc/sysrq-trigger. The file is masked by a bind of /dev/null
// (src/fs/plan.rs, PROC_MASKED_FILES): the write fails or lands in /dev/null, never in the
// kernel's sysrq handler. The key written is `h` (print the sysrq help to the kernel log), not
// `b` (reboot): were the mask and every other layer gone, the test must not take the machine
// down with it.

const SYSRQ: &str = r#"
import errno, os
st = os.stat("/proc/sysrq-trigger")
print("rdev", os.major(st.st_rdev), os.minor(st.st_rdev))
print("mounted-over", any(l.split()[4] == "/proc/sysrq-trigger" for l in open("/proc/self/mountinfo")))
try:
    fd = os.open("/proc/sysrq-trigger", os.O_WRONLY)
    print("write", os.write(fd, b"h"))
except OSError as e:
    print("write", errno.errorcode.get(e.errno, e.errno))
print("read", len(open("/proc/sysrq-trigger", "rb").read()))
"#;

both!(fn case15_sysrq_trigger_write_goes_nowhere(who) {
    if !std::path::Path::new("/proc/sysrq-trigger").exists() {
        // A kernel without CONFIG_MAGIC_SYSRQ: nothing to mask, nothing to write to.
        let r = py_ok(who, "import os\nprint(os.path.exists('/proc/sysrq-trigger'))");
        assert_eq!(r.output(), "False\n", "{}", r.describe());
        skip!("SKIP: {}: this kernel has no /proc/sysrq-trigger (no CONFIG_MAGIC_SYSRQ)", module_path!());
        return;
    }
    let r = py_ok(who, SYSRQ);
    let got = results(r.output());
    // /dev/null, char 1:3: the mask is in place.
    expect(&r, &got, "rdev", &["1 3"]);
    expect(&r, &got, "mounted-over", &["True"]);
    // Landlock allows writing /dev/null, whose inode this is: the byte is discarded.
    expect(&r, &got, "write", &["1", "EACCES", "EPERM", "EROFS"]);
    expect(&r, &got, "read", &["0"]);
});

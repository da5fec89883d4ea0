//! What a program sees from inside `cordon exec`: credentials, filesystem, /proc, network,
//! syscalls, environment, fds. Every assertion is made from inside the sandbox (or, for the
//! network and planted files, by a host-side witness) and runs as root and as a user.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeSet;
use std::os::linux::net::SocketAddrExt;

both!(fn status_no_new_privs_no_caps_seccomp(who) {
    let r = exec_json_run(who, &[] as &[&str], &["cat", "/proc/self/status"]);
    let status = r.expect_ok().to_string();
    let field = |k: &str| {
        status_field(&status, k).unwrap_or_else(|| panic!("no {k} in /proc/self/status:\n{status}")).to_string()
    };
    assert_eq!(field("NoNewPrivs"), "1", "no_new_privs not set:\n{status}");
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(cap), "0000000000000000", "{cap} is not empty:\n{status}");
    }
    assert_eq!(field("Seccomp"), "2", "no seccomp filter (2 = SECCOMP_MODE_FILTER):\n{status}");
    // The JSON report must agree with what the kernel says.
    assert_eq!(r.get("/isolation/noNewPrivs"), &serde_json::json!(true), "{}", r.describe());
});

both!(fn uid_gid_maps_and_id(who) {
    let r = sh_ok(
        who,
        "cat /proc/self/uid_map; echo --; cat /proc/self/gid_map; echo --; \
         id -u; id -g; id -un; id -gn; echo --; cat /proc/self/setgroups",
    );
    let out = r.output();
    let parts: Vec<&str> = out.split("--\n").collect();
    assert_eq!(parts.len(), 4, "unexpected output:\n{}", r.describe());
    let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let uid_map = words(parts[0]);
    assert_eq!(uid_map.len(), 3, "uid_map must have exactly one line:\n{}", r.describe());
    assert_eq!((uid_map[0].as_str(), uid_map[2].as_str()), ("1000", "1"), "{}", r.describe());
    let host_uid: u32 = uid_map[1].parse().expect("host uid");
    assert!(
        who.is_expected_host_uid(host_uid),
        "uid_map maps 1000 to host uid {host_uid} (root never maps to host uid 0, nor to a shared one):\n{}",
        r.describe()
    );
    let gid_map = words(parts[1]);
    assert_eq!(gid_map.len(), 3, "gid_map must have exactly one line:\n{}", r.describe());
    assert_eq!(gid_map[0], "1000", "gid inside must be 1000:\n{}", r.describe());
    assert_eq!(gid_map[2], "1", "gid_map must map a single gid:\n{}", r.describe());
    match who {
        Who::User => assert_eq!(gid_map[1], who.caller_gid().to_string(), "{}", r.describe()),
        Who::Root => assert_ne!(gid_map[1], "0", "a root caller must not map to host gid 0:\n{}", r.describe()),
    }
    assert_eq!(words(parts[2]), ["1000", "1000", "sandbox", "sandbox"], "`id` inside:\n{}", r.describe());
    assert_eq!(r.get("/isolation/uid"), &serde_json::json!(1000), "{}", r.describe());
    assert_eq!(r.get("/isolation/gid"), &serde_json::json!(1000), "{}", r.describe());
    assert_eq!(r.get("/isolation/hostUid"), &serde_json::json!(host_uid), "{}", r.describe());
});

/// Tries to create files and prints `path errno-name` for each (OK when it worked).
const TRY_CREATE: &str = r#"
import errno, os, sys
for p in sys.argv[1:]:
    try:
        with open(p, "w") as f:
            f.write("x")
        print(p, "OK")
    except OSError as e:
        print(p, errno.errorcode.get(e.errno, e.errno))
print("cwd", os.getcwd())
print("home", os.environ.get("HOME"))
"#;

both!(fn root_usr_etc_read_only_workspace_tmp_writable(who) {
    let r = exec_json_run(
        who,
        &[] as &[&str],
        &[
            PY, "-c", TRY_CREATE,
            "/cordon-probe", "/usr/cordon-probe", "/etc/cordon-probe",
            "/workspace/probe", "/tmp/probe", "relative-probe",
        ],
    );
    let out = r.expect_ok();
    let result: std::collections::BTreeMap<&str, &str> =
        out.lines().filter_map(|l| l.split_once(' ')).collect();
    for ro in ["/cordon-probe", "/usr/cordon-probe", "/etc/cordon-probe"] {
        assert_eq!(result.get(ro), Some(&"EROFS"), "{ro} must be on a read-only mount:\n{}", r.describe());
    }
    for rw in ["/workspace/probe", "/tmp/probe", "relative-probe"] {
        assert_eq!(result.get(rw), Some(&"OK"), "{rw} must be writable:\n{}", r.describe());
    }
    assert_eq!(result.get("cwd"), Some(&"/workspace"), "{}", r.describe());
    assert_eq!(result.get("home"), Some(&"/workspace"), "{}", r.describe());
});

both!(fn host_paths_absent(who) {
    // A file planted on the host's /tmp must not show up in the sandbox's /tmp.
    let planted = tempfile::Builder::new().prefix("cordon-planted.").tempfile_in("/tmp").unwrap();
    let planted_name = planted.path().file_name().unwrap().to_str().unwrap().to_string();
    std::fs::set_permissions(planted.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    // Host directories that have content here; the sandbox must show none of it.
    let script = format!(
        r#"
for p in /etc/shadow /etc/gshadow /etc/sudoers /tmp/{planted_name} /sys/fs/cgroup /sys/kernel \
         /run/systemd /var/log /var/lib /root/.bashrc /home/{user}; do
    if [ -e "$p" ] || [ -L "$p" ]; then echo "VISIBLE $p"; fi
done
for d in /home /root /var /run /sys; do
    if [ -d "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ]; then echo "NONEMPTY $d: $(ls -A "$d" | tr '\n' ' ')"; fi
done
grep -q '^sandbox:' /etc/passwd || echo "NO-SANDBOX-IN-PASSWD"
grep -q '^{user}:' /etc/passwd && echo "HOST-PASSWD"
echo done
"#,
        user = test_user_name(),
    );
    let r = sh_ok(who, &script);
    assert_eq!(r.output(), "done\n", "host paths leak into the sandbox:\n{}", r.describe());
    // Sanity of the witness: the host really has what the sandbox must not show.
    assert!(planted.path().exists());
    assert!(std::path::Path::new("/etc/shadow").exists(), "host has no /etc/shadow: witness invalid");
});

both!(fn proc_only_sandbox_pids_and_init_is_cordon(who) {
    let r = py_ok(
        who,
        "import os\n\
         pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n\
         print(' '.join(map(str, pids)))\n\
         print(os.getpid())\n\
         print(open('/proc/1/comm').read().strip())\n",
    );
    let lines: Vec<&str> = r.output().lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.describe());
    let pids: Vec<u32> = lines[0].split_whitespace().map(|p| p.parse().unwrap()).collect();
    let me: u32 = lines[1].parse().unwrap();
    assert!(pids.contains(&1), "pid 1 must exist in the sandbox's /proc:\n{}", r.describe());
    assert!(pids.contains(&me), "the payload's own pid must be in /proc:\n{}", r.describe());
    // init + payload (+ at most one helper); the host has far more processes than this.
    assert!(pids.len() <= 3, "/proc shows more than the sandbox's processes: {pids:?}\n{}", r.describe());
    assert!(me < 10, "the payload should have a small pid in a fresh pid namespace, got {me}");
    assert_eq!(lines[2], "cordon", "pid 1 must be cordon's init:\n{}", r.describe());
});

both!(fn proc_sensitive_files_masked(who) {
    let r = sh_ok(
        who,
        "for f in /proc/kcore /proc/keys /proc/sysrq-trigger /proc/timer_list /proc/cmdline /proc/interrupts /proc/softirqs; do \
           n=$(head -c 4096 \"$f\" 2>/dev/null | wc -c); \
           if [ \"$n\" -ne 0 ]; then echo \"READABLE $f $n\"; fi; \
         done; \
         n=$(tr -d '\\000' < /proc/1/cmdline | wc -c); \
         if [ \"$n\" -ne 0 ]; then echo \"READABLE /proc/1/cmdline $n\"; fi; \
         echo done",
    );
    // init's command line (cordon's own, with the caller's arguments) is cleared to NULs.
    assert_eq!(r.output(), "done\n", "masked /proc files must read empty or fail:\n{}", r.describe());
});

both!(fn proc_sys_read_only(who) {
    let r = sh_ok(
        who,
        "if (echo 1 > /proc/sys/kernel/ns_last_pid) 2>/dev/null; then echo WROTE-ns_last_pid; fi; \
         if (echo x > /proc/sys/kernel/hostname) 2>/dev/null; then echo WROTE-hostname; fi; \
         awk '$5 == \"/proc/fs\" { print \"fs\", $6 }' /proc/self/mountinfo; \
         awk '$5 == \"/proc/sys\" { print $6 }' /proc/self/mountinfo",
    );
    let out = r.output();
    assert!(!out.contains("WROTE"), "a /proc/sys write succeeded:\n{}", r.describe());
    let opts = out.lines().last().unwrap_or("");
    assert!(
        opts.split(',').any(|o| o == "ro"),
        "/proc/sys must be a read-only mount (mountinfo options {opts:?}):\n{}",
        r.describe()
    );
    // /proc/fs (nfsd's export controls, where loaded), as runc keeps it.
    if std::path::Path::new("/proc/fs").is_dir() {
        let fs = out.lines().find_map(|l| l.strip_prefix("fs ")).unwrap_or("");
        assert!(
            fs.split(',').any(|o| o == "ro"),
            "/proc/fs must be a read-only mount (mountinfo options {fs:?}):\n{}",
            r.describe()
        );
    }
});

/// Prints `<label> OK` or `<label> <errno name>` for each connection attempt.
const TRY_CONNECT: &str = r#"
import errno, socket, sys
def attempt(label, family, addr, kind=socket.SOCK_STREAM):
    s = socket.socket(family, kind)
    s.settimeout(3)
    try:
        s.connect(addr)
        print(label, "OK")
    except socket.timeout:
        print(label, "TIMEOUT")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
attempt("internet", socket.AF_INET, ("1.1.1.1", 53))
attempt("host-lo", socket.AF_INET, ("127.0.0.1", int(sys.argv[1])))
attempt("host-abstract", socket.AF_UNIX, "\0" + sys.argv[2])
ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print("ifaces", ",".join(ifaces))
"#;

both!(fn network_only_loopback_and_no_way_out(who) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let abstract_name = format!("cordon-test-{}-{:?}", std::process::id(), who);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let unix_listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    unix_listener.set_nonblocking(true).unwrap();

    let r = exec_json_run(
        who,
        &[] as &[&str],
        &[PY, "-c", TRY_CONNECT, &port.to_string(), &abstract_name],
    );
    let out = r.expect_ok();
    let result: std::collections::BTreeMap<&str, &str> =
        out.lines().filter_map(|l| l.split_once(' ')).collect();
    for label in ["internet", "host-lo", "host-abstract"] {
        let got = result.get(label).copied();
        assert!(got.is_some() && got != Some("OK"), "{label} connect must fail, got {got:?}:\n{}", r.describe());
    }
    assert_eq!(result.get("ifaces"), Some(&"lo"), "only lo may exist:\n{}", r.describe());
    // Host-side witnesses: nothing reached the listeners.
    assert!(listener.accept().is_err(), "the host TCP listener accepted a connection from the sandbox");
    assert!(unix_listener.accept().is_err(), "the host abstract socket accepted a connection");
    assert_eq!(r.get("/isolation/network").as_str().map(|s| s.is_empty()), Some(false), "{}", r.describe());
    // A program that fails on a name lookup is told that the network is off, and how to
    // let a host through; `--net host` would not get the note.
    let lookup = "import socket; socket.getaddrinfo('pypi.org', 443)";
    let r = exec_json_run(who, &[] as &[&str], &[PY, "-c", lookup]);
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(msg.contains("the sandbox has no network") && msg.contains("--net allow=HOST"), "{}", r.describe());
});

/// The sandbox's own loopback is up (init brings it up; it starts down in a new network
/// namespace): a UDP datagram to 127.0.0.1 comes back, and `lo` has IFF_UP. Landlock governs
/// only TCP, so UDP on the sandbox's loopback is allowed.
const LOOPBACK_UDP: &str = r#"
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.sendto(b"ping", s.getsockname())
s.settimeout(5)
print("udp", s.recv(16).decode())
flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), 0x8913, struct.pack("16sH", b"lo", 0)))[1]
print("lo-up", flags & 1)
"#;

both!(fn the_sandbox_loopback_is_up(who) {
    let r = exec_json_run(who, &[] as &[&str], &[PY, "-c", LOOPBACK_UDP]);
    let out = r.expect_ok();
    assert!(out.contains("udp ping\n") && out.contains("lo-up 1\n"), "lo must be up and carry a datagram:\n{}", r.describe());
});

/// Calls syscalls the default policy denies; prints `<name> <ret> <errno name>`.
const TRY_SYSCALLS: &str = r#"
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": {"io_uring_setup": 425, "keyctl": 250, "clone3": 435},
      "aarch64": {"io_uring_setup": 425, "keyctl": 219, "clone3": 435}}[platform.machine()]
def report(name, ret):
    e = ctypes.get_errno() if ret == -1 else 0
    print(name, ret, errno.errorcode.get(e, e) if e else "-")
    ctypes.set_errno(0)
report("unshare", libc.unshare(0x10000000))  # CLONE_NEWUSER: allowed without caps, if not filtered
report("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
report("ptrace", libc.ptrace(0, 0, None, None))  # PTRACE_TRACEME: always allowed, if not filtered
params = ctypes.create_string_buffer(120)
report("io_uring_setup", libc.syscall(nr["io_uring_setup"], 1, params))
report("keyctl", libc.syscall(nr["keyctl"], 0, -3, 0))  # KEYCTL_GET_KEYRING_ID(session)
report("clone3", libc.syscall(nr["clone3"], None, 0))
"#;

both!(fn denied_syscalls_get_eperm(who) {
    let r = py_ok(who, TRY_SYSCALLS);
    let got: std::collections::BTreeMap<String, String> = r
        .output()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3).then(|| (f[0].to_string(), format!("{} {}", f[1], f[2])))
        })
        .collect();
    for name in ["unshare", "mount", "ptrace", "io_uring_setup", "keyctl"] {
        assert_eq!(got.get(name).map(String::as_str), Some("-1 EPERM"), "{name} must fail with EPERM:\n{}", r.describe());
    }
    // clone3 gets ENOSYS so that libc falls back to clone, whose flags seccomp can inspect.
    assert_eq!(got.get("clone3").map(String::as_str), Some("-1 ENOSYS"), "{}", r.describe());
});

both!(fn netlink_and_packet_sockets_denied(who) {
    let r = py_ok(
        who,
        "import socket\n\
         for name, fam, kind in [('netlink', 16, socket.SOCK_RAW), ('packet', 17, socket.SOCK_RAW)]:\n\
         \x20   try:\n\
         \x20       socket.socket(fam, kind, 0); print(name, 'OPENED')\n\
         \x20   except PermissionError:\n\
         \x20       print(name, 'EPERM')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, 'errno', e.errno)\n",
    );
    assert_eq!(r.output(), "netlink EPERM\npacket EPERM\n", "{}", r.describe());
});

both!(fn environment_scrubbed(who) {
    let r = Cordon::exec(who, &["--json", "--env", "A=1"], &["cat", "/proc/self/environ"])
        .env("SECRET_TOKEN", "hunter2-cordon")
        .env("LD_LIBRARY_PATH", "/nonexistent-cordon")
        .run_json();
    let environ = r.expect_ok().to_string();
    let vars: Vec<&str> = environ.split('\0').filter(|s| !s.is_empty()).collect();
    assert!(!environ.contains("hunter2-cordon"), "the caller's environment leaked:\n{}", r.describe());
    assert!(vars.contains(&"A=1"), "--env A=1 missing:\n{}", r.describe());
    assert!(vars.contains(&"HOME=/workspace"), "{}", r.describe());
    assert!(vars.contains(&"USER=sandbox"), "{}", r.describe());
    let allowed: BTreeSet<&str> = ["PATH", "HOME", "LANG", "USER", "TERM", "A"].into();
    for v in &vars {
        let key = v.split('=').next().unwrap();
        assert!(allowed.contains(key), "unexpected variable {v:?} in the payload's environment:\n{}", r.describe());
    }

    // printenv agrees (a second path to the same fact, through a shell).
    let r = Cordon::exec(who, &["--json"], &["sh", "-c", "printenv SECRET_TOKEN; echo rc=$?"])
        .env("SECRET_TOKEN", "hunter2-cordon")
        .run_json();
    assert_eq!(r.expect_ok(), "rc=1\n", "{}", r.describe());
});

fn fd_listing(who: Who, extra_fds: Option<&str>) {
    let mut c = Cordon::exec(who, &["--json"], &["ls", "-1", "/proc/self/fd"]);
    if let Some(redir) = extra_fds {
        c = c.extra_fds(redir);
    }
    let r = c.run_json();
    let fds: BTreeSet<u32> = r
        .expect_ok()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    // 0-2, plus the directory fd `ls` itself opened to list /proc/self/fd.
    assert!(fds.is_superset(&[0, 1, 2].into()), "{}", r.describe());
    assert!(
        fds.len() <= 4 && fds.iter().all(|&fd| fd <= 3),
        "fds beyond 0-2 leaked: {fds:?}\n{}",
        r.describe()
    );
}

both!(fn only_fds_0_1_2_open(who) {
    fd_listing(who, None);
});

both!(fn inherited_fds_are_closed(who) {
    // cordon itself is started with fds 7 and 9 open (no CLOEXEC): they must not reach the payload.
    fd_listing(who, Some("7</etc/hostname 9>/dev/null"));
});

// Case 14 across processes: no process of the sandbox shows a descriptor of the host
// (init's are unreadable: it is not dumpable; the program's own and its children's are
// pipes, /dev nodes and what it opened itself).
both!(fn no_host_descriptor_through_any_proc_fd(who) {
    let code = r#"
import os, subprocess
child = subprocess.Popen(["sleep", "5"])
for p in sorted(os.listdir("/proc")):
    if not p.isdigit():
        continue
    try:
        fds = os.listdir("/proc/%s/fd" % p)
    except OSError as e:
        print(p, "unlisted", e.errno)
        continue
    for fd in fds:
        try:
            print(p, fd, os.readlink("/proc/%s/fd/%s" % (p, fd)))
        except OSError:
            pass
child.kill()
"#;
    let r = exec_json_run(who, &[] as &[&str], &[PY, "-c", code]);
    let out = r.expect_ok();
    assert!(out.lines().any(|l| l == "1 unlisted 13"), "init's descriptors must be unreadable (EACCES):\n{}", r.describe());
    let mut listed = 0;
    for l in out.lines().filter(|l| !l.contains(" unlisted ")) {
        let target = l.splitn(3, ' ').nth(2).unwrap_or_default();
        // The sandbox's own objects: its pipes, sockets and anonymous inodes, and files of its
        // own mounts (a starting `sleep` may hold a locale file of /usr for a moment).
        let inside = ["pipe:", "socket:", "anon_inode:", "/dev/", "/proc/", "/usr/", "/etc/", "/workspace", "/tmp"]
            .iter()
            .any(|p| target.starts_with(p));
        assert!(inside, "a descriptor points outside the sandbox's own objects: {l}\n{}", r.describe());
        listed += 1;
    }
    assert!(listed >= 6, "the program's and its child's descriptors must be listed:\n{}", r.describe());
});

both!(fn hostname_is_cordon(who) {
    let r = sh_ok(who, "uname -n; cat /proc/sys/kernel/hostname");
    assert_eq!(r.output(), "cordon\ncordon\n", "{}", r.describe());
});

both!(fn generated_etc_and_minimal_dev(who) {
    let r = sh_ok(
        who,
        "for f in /etc/passwd /etc/group /etc/hosts /etc/nsswitch.conf /etc/ld.so.cache \
                  /dev/null /dev/zero /dev/urandom; do [ -e \"$f\" ] || echo \"MISSING $f\"; done; \
         grep -c '^sandbox:x:1000:1000:' /etc/passwd; \
         head -c 8 /dev/zero | wc -c; \
         for d in /dev/sda /dev/vda /dev/mem /dev/kmsg /dev/tty0; do [ -e \"$d\" ] && echo \"HOSTDEV $d\"; done; \
         echo x > /dev/null && echo written; \
         for f in /dev/null /dev/zero /dev/urandom /proc/keys /proc/cmdline; do \
             touch -c \"$f\" 2>/dev/null && echo \"TOUCHED $f\"; done; \
         echo done",
    );
    // The nodes are the host's (bound in): they read and write, but their inodes (times,
    // modes) are out of reach on their read-only mounts. So is the null device bound over
    // the masked /proc files (/proc/keys, /proc/cmdline).
    assert_eq!(r.output(), "1\n8\nwritten\ndone\n", "{}", r.describe());
});

// The directories shown from the host's /etc (CA certificates, alternatives) come from one
// private read-only overlay of /etc, made for this sandbox (where the kernel can copy a
// detached mount; one overlay each before), each rooted at its own directory: `..` at their
// roots is the sandbox's own /etc (nothing else of the host's /etc, its openssl.cnf, is
// reachable through them), and a lock on one of their files stays the sandbox's own.
both!(fn host_etc_directories_share_one_private_overlay_and_show_nothing_more(who) {
    let script = "grep ' - overlay ' /proc/self/mountinfo; \
                  ls -A /etc/ssl; ls -A /etc/ssl/certs/.. ; \
                  for f in /etc/ssl/openssl.cnf /etc/ssl/private /etc/shadow /etc/fstab; do \
                      [ -e \"$f\" ] && echo \"HOST $f\"; done; \
                  [ -s /etc/ssl/certs/ca-certificates.crt ] && echo bundle; \
                  [ -L /etc/alternatives/awk ] && echo alternatives; echo done";
    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", script]);
    let out = r.expect_ok();
    let overlays: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.contains(" - "))
        .map(|l| l.split(' ').collect())
        .collect();
    let (mounts, others): (Vec<_>, Vec<_>) = overlays
        .into_iter()
        .partition(|m| matches!(m[4], "/etc/ssl/certs" | "/etc/alternatives"));
    assert_eq!(mounts.len(), 2, "{}", r.describe());
    // The overlay's own mount, through which its directories were copied, is not in the
    // sandbox (it went with the old root): no other mount shows that superblock.
    for o in &others {
        assert!(
            mounts.iter().all(|m| m[2] != o[2]),
            "{o:?} shows the /etc overlay\n{}",
            r.describe()
        );
    }
    for m in &mounts {
        let fstype = m.iter().skip_while(|f| **f != "-").nth(1).copied();
        assert_eq!(fstype, Some("overlay"), "{:?}\n{}", m, r.describe());
    }
    // One overlay needs a kernel that copies detached mounts, and a host /etc the overlay can
    // show them from: no mount below it (a container's /etc/hosts), no symlink on the way.
    let host_mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounts_below_etc = host_mounts
        .lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|m| m.starts_with("/etc/")));
    let plain_etc = !mounts_below_etc && !std::path::Path::new("/etc/ssl/certs").is_symlink();
    if kernel_copies_detached_mounts() && plain_etc {
        assert_eq!(mounts[0][2], mounts[1][2], "one overlay for both:\n{}", r.describe());
        let roots: BTreeSet<&str> = mounts.iter().map(|m| m[3]).collect();
        assert_eq!(roots, BTreeSet::from(["/alternatives", "/ssl/certs"]), "{}", r.describe());
    }
    let rest: Vec<&str> = out.lines().filter(|l| !l.contains(" - ")).collect();
    let mut want = vec!["certs", "certs", "bundle"];
    if std::path::Path::new("/etc/alternatives/awk").is_symlink() {
        want.push("alternatives");
    }
    want.push("done");
    assert_eq!(rest, want, "{}", r.describe());

    // A lock on the shared bundle is the sandbox's own.
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    // A holds the lock until the test closes its stdin.
    let mut a = Cordon::exec(who, &[] as &[&str], &["flock", "-x", bundle, "sh", "-c", "echo held; cat > /dev/null"]).hold();
    a.wait_for_line("held");
    let host = std::process::Command::new("flock").args(["-n", "-s", bundle, "true"]).status().unwrap();
    let b = exec_json_run(who, &[] as &[&str], &["sh", "-c", &format!("flock -n -x {bundle} sh -c 'echo free' || echo busy")]);
    let fa = a.finish();
    assert_eq!((fa.code, fa.stdout_str().as_str()), (0, "held\n"), "{}", fa.describe());
    assert_eq!(b.expect_ok(), "free\n", "sandbox B saw sandbox A's lock:\n{}", b.describe());
    assert!(host.success(), "a sandbox's flock on {bundle} blocked a host process");
});

// Fontconfig (matplotlib and Pillow ask it for the system's fonts) finds the host's fonts
// through a generated /etc/fonts/fonts.conf, without "Cannot load default config file", and
// writes its cache under /tmp: nothing of it lands in /workspace among the program's files.
both!(fn fontconfig_finds_the_hosts_fonts_and_writes_nothing_in_the_workspace(who) {
    let test = "fontconfig_finds_the_hosts_fonts_and_writes_nothing_in_the_workspace";
    if !std::path::Path::new("/usr/bin/fc-list").exists() || !std::path::Path::new("/etc/fonts/fonts.conf").exists() {
        skip_unless_required!("SKIP: {test}: no fontconfig on this host (apt-get install fontconfig fonts-dejavu-core)");
        return;
    }
    let script = "fc-list : file | grep -c /usr/share/fonts/; ls -A /workspace";
    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", script]);
    let out = r.expect_ok();
    let mut lines = out.lines();
    let count: u32 = lines.next().unwrap_or("").parse().unwrap_or(0);
    assert!(count > 0, "fc-list found no font under /usr/share/fonts:\n{}", r.describe());
    assert!(!r.error().contains("Fontconfig error"), "{}", r.describe());
    assert_eq!(lines.next(), None, "fontconfig must write nothing in /workspace:\n{}", r.describe());
});

// The includes of that fonts.conf come from the caller's cache file of them (kept between
// runs, src/fs/fonts.rs) while /etc/fonts is unchanged: a path added to a whole, matching
// file of the caller's shows in the sandbox's fonts.conf; the same file made writable by
// others is not read (the includes are scanned again, and the file rewritten).
both!(fn fontconfig_includes_come_from_the_callers_own_cache_file(who) {
    let test = "fontconfig_includes_come_from_the_callers_own_cache_file";
    if !std::path::Path::new("/etc/fonts/fonts.conf").exists() || !std::path::Path::new("/etc/fonts/conf.d").is_dir() {
        skip_unless_required!("SKIP: {test}: no fontconfig on this host (apt-get install fontconfig fonts-dejavu-core)");
        return;
    }
    let cache = match who {
        Who::Root => std::path::PathBuf::from("/var/cache/cordon/fonts"),
        Who::User => user_home().join(".cache/cordon/fonts"),
    };
    let conf = || exec_json_run(who, &[] as &[&str], &["cat", "/etc/fonts/fonts.conf"]).expect_ok().to_string();
    let first = conf();
    let text = std::fs::read_to_string(&cache)
        .unwrap_or_else(|e| panic!("no cache file {} after a run: {e}", cache.display()));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2 && lines[lines.len() - 1] == format!("end {}", lines.len() - 2), "{text}");
    for path in &lines[1..lines.len() - 1] {
        assert!(first.contains(&format!(">{path}</include>")), "{path} is cached but not included:\n{first}");
    }
    let marker = format!("/usr/share/cordon-test-{}-{}.conf", std::process::id(), who.caller_uid());
    let mut planted = lines[..lines.len() - 1].join("\n");
    planted.push_str(&format!("\n{marker}\nend {}\n", lines.len() - 1));
    let plant = |mode: u32| {
        let tmp = cache.with_file_name(format!(".test-{}", std::process::id()));
        std::fs::write(&tmp, &planted).unwrap();
        std::os::unix::fs::chown(&tmp, Some(who.caller_uid()), Some(who.caller_gid())).unwrap();
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
        std::fs::rename(&tmp, &cache).unwrap();
    };
    plant(0o600);
    let hit = conf();
    assert!(hit.contains(&format!(">{marker}</include>")), "the cache file was not read:\n{hit}");
    plant(0o622);
    let refused = conf();
    assert!(!refused.contains(&marker), "a cache file others may write was read:\n{refused}");
    assert_eq!(refused, first, "the includes scanned again differ from the first run's");
    let rewritten = std::fs::read_to_string(&cache).unwrap();
    assert!(!rewritten.contains(&marker), "the refused file was not replaced:\n{rewritten}");
});

/// Prints the sandbox's network namespace (`ns net:[N]`), whether `lo` is up (`lo_up 1`), and
/// whether the namespace belongs to the sandbox's user namespace (`owner sandbox`; NS_GET_USERNS
/// answers EPERM for a namespace owned outside it, such as the host's).
const NETNS_FACTS: &str = r#"
import fcntl, os, socket, struct
print("ns", os.readlink("/proc/self/ns/net"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH22x", fcntl.ioctl(s.fileno(), 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]
print("lo_up", flags & 1)
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
try:
    owner = fcntl.ioctl(fd, 0xb701)
    same = os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino
    print("owner", "sandbox" if same else "other")
except OSError as e:
    print("owner", "error", e.errno)
"#;

both!(fn network_namespace_is_the_sandboxs_own(who) {
    let host_ns = std::fs::read_link("/proc/self/ns/net").expect("read the host's netns link");
    let host_ns = host_ns.to_string_lossy().into_owned();
    // The default (`--net none`) and `--net allow=` both give the sandbox its own namespace,
    // made by init's helper and entered before the program runs.
    for opts in [vec![], vec!["--net", "allow=localhost:9"]] {
        let r = exec_json_run(who, &opts, &[PY, "-c", NETNS_FACTS]);
        let out = r.expect_ok();
        let facts: std::collections::BTreeMap<&str, &str> =
            out.lines().filter_map(|l| l.split_once(' ')).collect();
        let ns = facts.get("ns").copied().unwrap_or("");
        assert!(ns.starts_with("net:["), "{opts:?}: no netns link:\n{}", r.describe());
        assert_ne!(ns, host_ns, "{opts:?}: the program runs in the host's network namespace:\n{}", r.describe());
        assert_eq!(facts.get("lo_up"), Some(&"1"), "{opts:?}: lo is not up:\n{}", r.describe());
        assert_eq!(facts.get("owner"), Some(&"sandbox"), "{opts:?}: the netns is not owned by the sandbox's user namespace:\n{}", r.describe());
    }
});

/// cordon as uid 0 of a nested user namespace: as root, through [`NEST`]'s helper with `maps`; as the
/// test user, `unshare --map-auto --map-root-user` (its /etc/subuid range) when `maps` has
/// more than root's line, else `unshare --map-root-user`. None: the machine lacks what the
/// user variant needs (said as a SKIP).
fn nested(who: Who, maps: &str, cmd: &[&str]) -> Option<Finished> {
    nested_cordon(who, maps, Cordon::exec(who, &["--json"], cmd))
}

/// `c` run by root of a nested user namespace with `maps` (see [`nested`]).
fn nested_cordon(who: Who, maps: &str, mut c: Cordon) -> Option<Finished> {
    match who {
        Who::Root => {
            let dir = shared_tempdir();
            let script = write_nest_script(dir.path());
            let setup = format!("exec {PY} {} \"$@\"", script.display());
            let r = c.env("NEST_MAPS", maps).shell_setup(&setup).run();
            drop(dir);
            Some(r)
        }
        Who::User => {
            let ranged = maps.contains("\\n");
            if ranged {
                let name = test_user().map_or_else(|| "?".into(), |u| u.name);
                let listed = std::fs::read_to_string("/etc/subuid")
                    .is_ok_and(|t| t.lines().any(|l| l.starts_with(&format!("{name}:"))));
                let tool = std::path::Path::new("/usr/bin/newuidmap").exists();
                if !listed || !tool {
                    skip_unless_required!(
                        "SKIP: nested user namespace with a range: needs newuidmap (uidmap) and a /etc/subuid line for {name}"
                    );
                    return None;
                }
            }
            let flags = if ranged {
                "--map-auto --map-root-user"
            } else {
                "--map-root-user"
            };
            c = c.shell_setup(&format!("exec unshare {flags} \"$@\""));
            Some(c.run())
        }
    }
}

both!(fn root_of_a_nested_user_namespace_gets_ids_of_its_range(who) {
    // A rootless container's root: its own id 0 (the user outside) and 65536 subordinate ids.
    let Some(r) = nested(who, "0 0 1\\n1 200000 65536", &["/bin/sh", "-c", "cat /proc/self/uid_map /proc/self/gid_map; id -u"])
    else {
        return;
    };
    let json: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", r.describe()));
    assert_eq!(json["status"], "ok", "{}", r.describe());
    let out = json["output"].as_str().unwrap_or_default();
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines.len(), 3, "{}", r.describe());
    for map in &lines[..2] {
        assert_eq!((map[0], map[2]), ("1000", "1"), "{}", r.describe());
        let id: u32 = map[1].parse().unwrap();
        // Never the namespace's root (the caller itself), never nobody; high in the range.
        assert!(
            (32768..=65536).contains(&id) && id != 65534 && id != 65535,
            "the sandbox's id {id} is not from the upper half of the namespace's range:\n{}",
            r.describe()
        );
    }
    assert_eq!(lines[2], ["1000"], "{}", r.describe());
    assert_eq!(json["isolation"]["hostUid"].to_string(), lines[0][1], "{}", r.describe());
});

both!(fn root_of_a_nested_user_namespace_keeps_its_state_where_var_is_its_own(who) {
    // Root keeps its history in /var/lib/cordon where /var is its own, whatever XDG says; root
    // of a namespace on the host's file system whose /var it does not own (the user's
    // `unshare --map-root-user`: /var shows as owned by an unmapped id) keeps it in its XDG
    // directories, as the user it is. Above those, /tmp shows as owned by that unmapped id (the
    // host's root), which must not make them refused. (Root's namespace here maps the host's
    // root to its own 0, so /var is its own.)
    let state = tempfile::Builder::new().prefix("cordon-test.").tempdir_in("/tmp").unwrap();
    std::os::unix::fs::chown(state.path(), Some(who.caller_uid()), Some(who.caller_gid())).unwrap();
    std::fs::set_permissions(state.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let c = Cordon::new(who)
        .arg("run")
        .arg("--lang=python")
        .arg("--json")
        .arg("-c")
        .arg("print(6 * 7)")
        .env("XDG_STATE_HOME", state.path());
    // The user's maps only itself: plain `unshare --map-root-user`, no subordinate ids needed.
    let maps = match who {
        Who::Root => "0 0 1\\n1 200000 65536",
        Who::User => "0 0 1",
    };
    let Some(r) = nested_cordon(who, maps, c) else {
        return;
    };
    let json: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", r.describe()));
    assert_eq!((json["status"].as_str(), json["output"].as_str()), (Some("ok"), Some("42\n")), "{}", r.describe());
    let id = json["executionId"].as_str().expect("executionId");
    let (history, elsewhere) = match who {
        Who::Root => (std::path::PathBuf::from("/var/lib/cordon/history.jsonl"), state.path().join("cordon/history.jsonl")),
        Who::User => (state.path().join("cordon/history.jsonl"), std::path::PathBuf::from("/var/lib/cordon/history.jsonl")),
    };
    let kept = std::fs::read_to_string(&history).unwrap_or_else(|e| panic!("{}: {e}\n{}", history.display(), r.describe()));
    assert!(kept.contains(id), "run {id} is not in {}:\n{kept}\n{}", history.display(), r.describe());
    let other = std::fs::read_to_string(&elsewhere).unwrap_or_default();
    assert!(!other.contains(id), "run {id} was also kept in {}:\n{}", elsewhere.display(), r.describe());
});

both!(fn root_of_a_user_namespace_that_maps_only_itself(who) {
    let Some(r) = nested(who, "0 0 1", &["/bin/sh", "-c", "cat /proc/self/uid_map; id -u"]) else {
        return;
    };
    match who {
        // Root mapped alone: the namespace's root is the host's root, which the sandbox must
        // never run as. Refused, saying why and what to do.
        Who::Root => {
            assert_eq!(r.code, 125, "{}", r.describe());
            let json: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", r.describe()));
            let msg = json["error"].as_str().unwrap_or_default().to_string() + &r.stderr_str();
            assert!(msg.contains("parent's root") && msg.contains("--map-auto"), "{}", r.describe());
        }
        // The user mapped alone (`unshare --map-root-user`): the sandbox runs as that user,
        // as an unprivileged caller's does.
        Who::User => {
            let json: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", r.describe()));
            assert_eq!(json["status"], "ok", "{}", r.describe());
            let out = json["output"].as_str().unwrap_or_default();
            let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
            assert_eq!(lines, [vec!["1000", "0", "1"], vec!["1000"]], "{}", r.describe());
            assert_eq!(json["isolation"]["hostUid"], 0, "{}", r.describe());
        }
    }
});

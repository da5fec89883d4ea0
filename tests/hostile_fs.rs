//! Hostile-input battery (issue 4), filesystem and output collection: cases 3-11 and 29.
//! Each test is a real attack program run through `cordon exec` or `cordon run`, as root and as
//! the unprivileged user; it passes only when the attack is contained AND the result says so.
//! See tests/hostile/README.md for the case → test map.

#[macro_use]
mod common;

use common::*;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// `cordon run --no-history …` as `who` (the user gets its own HOME and XDG directories).
fn cordon_run(who: Who) -> Cordon {
    Cordon::new(who).arg("run").arg("--no-history")
}

/// A directory `who` can write (an `--output-dir` parent).
fn writable_dir(who: Who) -> tempfile::TempDir {
    let dir = shared_tempdir();
    std::os::unix::fs::chown(dir.path(), Some(who.caller_uid()), Some(who.caller_gid()))
        .expect("chown the output dir to the caller");
    dir
}

/// `cordon run --lang python --json --output-dir OUT -c CODE -- ARGS`.
fn run_py_collect(who: Who, out: &Path, code: &str, args: &[&str], extra: &[&str]) -> JsonRun {
    let mut c = cordon_run(who)
        .arg("--lang")
        .arg("python")
        .arg("--json")
        .arg("--output-dir")
        .arg(out);
    for e in extra {
        c = c.arg(e);
    }
    c = c.arg("-c").arg(code).arg("--");
    for a in args {
        c = c.arg(a);
    }
    c.run_json()
}

/// `filesOmitted` as (path, reason).
fn omitted(r: &JsonRun) -> Vec<(String, String)> {
    let v = r.get("/filesOmitted");
    if v.is_null() {
        return Vec::new();
    }
    v.as_array()
        .unwrap_or_else(|| panic!("`filesOmitted` must be an array:\n{}", r.describe()))
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or("?").to_string(),
                f["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn omitted_reason(r: &JsonRun, path: &str) -> Option<String> {
    omitted(r)
        .into_iter()
        .find(|(p, _)| p == path)
        .map(|(_, why)| why)
}

/// Every entry under `dir` (relative paths), with whether it is a symlink.
fn tree(dir: &Path) -> Vec<(String, bool)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, bool)>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).expect("lstat");
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            out.push((rel, meta.file_type().is_symlink()));
            if meta.is_dir() {
                walk(base, &p, out);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// Asserts no file under `dir` is a symlink or holds a line of the sandbox's /etc/passwd.
fn assert_nothing_followed(dir: &Path, r: &JsonRun) {
    for (rel, is_link) in tree(dir) {
        assert!(
            !is_link,
            "{rel} in the output dir is a symlink:\n{}",
            r.describe()
        );
        let p = dir.join(&rel);
        if p.is_file() {
            let data = std::fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&data);
            assert!(
                !text.contains("sandbox:x:1000") && !text.contains("root:x:0"),
                "{rel} holds a passwd file: a symlink was followed:\n{}",
                r.describe()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Case 3: a surviving process flips an output file between a regular file and a symlink.

const FLIPPER: &str = r#"
import os, shutil, sys, time
open("steady.txt", "w").write("steady\n")
# A symlink to a directory outside (case 2, for a directory).
os.symlink("/etc", "etc-link")
def real_dir():
    os.mkdir("flipdir"); open("flipdir/inner.txt", "w").write("inner\n")
if os.fork() == 0:
    # The flipper: never exits on its own; flip.txt alternates file / symlink to /etc/passwd,
    # flipdir a directory holding a file / a symlink to /etc.
    os.setsid()
    while True:
        for make, makedir in ((lambda: open("flip.txt", "w").write("regular\n"), real_dir),
                              (lambda: os.symlink("/etc/passwd", "flip.txt"), lambda: os.symlink("/etc", "flipdir"))):
            for name, f in (("flip.txt", make), ("flipdir", makedir)):
                try:
                    if os.path.islink(name) or not os.path.isdir(name):
                        os.unlink(name)
                    else:
                        shutil.rmtree(name)
                except FileNotFoundError:
                    pass
                try:
                    f()
                except OSError:
                    pass
time.sleep(0.3)
print("main-exits", flush=True)
"#;

both!(fn case03_flipper_cannot_race_collection(who) {
    let m = marker(who, 301);
    for round in 0..3 {
        let parent = writable_dir(who);
        let out = parent.path().join("out");
        let r = run_py_collect(who, &out, FLIPPER, &[&m], &["--timeout", "20s"]);
        assert_eq!(r.expect_ok(), "main-exits\n", "round {round}:\n{}", r.describe());
        assert!(r.elapsed() < Duration::from_secs(15), "{}", r.describe());
        // The flipper was dead before collection: no process with the marker is left.
        assert_none_left(&m, Duration::from_secs(1), &r.describe());
        let listed = r.files();
        assert!(listed.contains(&("steady.txt".to_string(), 7)), "round {round}:\n{}", r.describe());
        // flip.txt is either collected as the regular file it was, or omitted as a symlink.
        match listed.iter().find(|(p, _)| p == "flip.txt") {
            Some((_, size)) => {
                // Caught as a regular file, possibly between its creation and its write.
                let got = std::fs::read(out.join("flip.txt")).unwrap();
                assert_eq!(got.len() as u64, *size, "{}", r.describe());
                assert!(b"regular\n".starts_with(&got), "flip.txt holds {got:?}:\n{}", r.describe());
            }
            None => {
                if let Some(why) = omitted_reason(&r, "flip.txt") {
                    assert!(why.contains("symbolic link"), "flip.txt omitted for {why:?}:\n{}", r.describe());
                }
                assert!(std::fs::symlink_metadata(out.join("flip.txt")).is_err(), "{}", r.describe());
            }
        }
        // flipdir: the directory it was (with at most its one file) or a symlink left out;
        // etc-link, a symlink to /etc, is never walked.
        for (path, _) in &listed {
            assert!(
                path == "steady.txt" || path == "flip.txt" || path == "flipdir/inner.txt",
                "round {round}: {path} collected:\n{}",
                r.describe()
            );
        }
        assert!(std::fs::symlink_metadata(out.join("etc-link")).is_err(), "{}", r.describe());
        assert!(
            omitted_reason(&r, "etc-link").is_some_and(|w| w.contains("symbolic link")),
            "etc-link must be listed as omitted, a symbolic link:\n{}",
            r.describe()
        );
        assert_nothing_followed(&out, &r);
    }
});

// ---------------------------------------------------------------------------------------------
// Case 4: symlinks planted where cordon writes input files.

both!(fn case04_planted_symlinks_never_written_through(who) {
    // Run 1 plants symlinks named like the input file everywhere it can write.
    let plant = sh_ok(
        who,
        "for d in /workspace /tmp /dev/shm; do ln -s /etc/passwd $d/data.txt && echo planted; done",
    );
    assert_eq!(plant.output(), "planted\nplanted\nplanted\n", "{}", plant.describe());

    // Run 2 gets data.txt as an input file: it must be a fresh regular file with the host's bytes.
    let src_dir = shared_tempdir();
    let src = src_dir.path().join("host-data.txt");
    write_world_readable(&src, b"host-bytes\n");
    let parent = writable_dir(who);
    let out = parent.path().join("out");
    let code = r#"
import os, stat
st = os.lstat("data.txt")
print("regular", stat.S_ISREG(st.st_mode), "content", open("data.txt").read().strip())
for d in ("/tmp", "/dev/shm"):
    print(d, os.path.lexists(d + "/data.txt"))
open("result.txt", "w").write("from-the-sandbox\n")
# Now plant a symlink named like the input file, for the collection.
os.unlink("data.txt")
os.symlink("/etc/passwd", "data.txt")
"#;
    let arg = format!("data.txt={}", src.display());
    let r = run_py_collect(who, &out, code, &[], &["--file", &arg]);
    assert_eq!(
        r.expect_ok(),
        "regular True content host-bytes\n/tmp False\n/dev/shm False\n",
        "{}",
        r.describe()
    );
    // The sandbox's symlink named like the input is omitted, not followed.
    assert!(
        omitted_reason(&r, "data.txt").is_some_and(|w| w.contains("symbolic link")),
        "data.txt (a symlink) must be listed in filesOmitted:\n{}",
        r.describe()
    );
    assert_eq!(r.files(), vec![("result.txt".to_string(), 17)], "{}", r.describe());
    assert_nothing_followed(&out, &r);
    assert_eq!(tree(&out), vec![("result.txt".to_string(), false)], "{}", r.describe());

    // The caller's output dir holds a symlink named like an output file: never written through;
    // cordon reports it (exit 125, naming the file) and keeps the program's own result.
    let parent = writable_dir(who);
    let out = parent.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(who.caller_uid()), Some(who.caller_gid())).unwrap();
    let victim = parent.path().join("victim");
    write_world_readable(&victim, b"victim-untouched\n");
    std::os::unix::fs::chown(&victim, Some(who.caller_uid()), Some(who.caller_gid())).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("result.txt")).unwrap();
    let r = run_py_collect(who, &out, "open('result.txt', 'w').write('from-the-sandbox')", &[], &[]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"victim-untouched\n", "{}", r.describe());
    assert!(
        std::fs::symlink_metadata(out.join("result.txt")).unwrap().file_type().is_symlink(),
        "cordon replaced the caller's symlink"
    );
    assert_eq!(r.code(), 125, "{}", r.describe());
    // The program's own exit code is kept; the run is no success (its files were not
    // delivered), which is cordon's failure to say, not the program's.
    assert_eq!(r.get("/exitCode").as_i64(), Some(0), "the program's own result is kept:\n{}", r.describe());
    assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
    assert_eq!(r.get("/success").as_bool(), Some(false), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("result.txt") && msg.contains("symlink"), "{}", r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 5: hard links to files outside the workspace.

const HARDLINKS: &str = r#"
import errno, os
def t(label, f):
    try:
        f(); print(label, "LINKED")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
open("/tmp/t", "w").write("t")
fd = os.open("/usr/bin/python3", os.O_RDONLY)
t("etc-passwd", lambda: os.link("/etc/passwd", "/workspace/a"))
t("usr-python", lambda: os.link("/usr/bin/python3", "/workspace/b"))
t("ld-cache", lambda: os.link("/etc/ld.so.cache", "/workspace/c"))
t("tmp-file", lambda: os.link("/tmp/t", "/workspace/d"))
t("proc-fd", lambda: os.link("/proc/self/fd/%d" % fd, "/workspace/e", follow_symlinks=True))
# linkat(fd, "", AT_FDCWD, dst, AT_EMPTY_PATH): links the open file itself (CAP_DAC_READ_SEARCH
# only; and across filesystems never).
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def empty_path():
    if libc.linkat(fd, b"", -100, b"/workspace/f", 0x1000) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
t("empty-path", empty_path)
print(sorted(os.listdir("/workspace")))
"#;

both!(fn case05_hard_links_out_of_the_workspace_fail(who) {
    let r = py_ok(who, HARDLINKS);
    let out = r.output();
    assert!(!out.contains("LINKED"), "a hard link into /workspace succeeded:\n{}", r.describe());
    for label in ["etc-passwd", "usr-python", "ld-cache", "tmp-file", "proc-fd"] {
        assert!(out.contains(&format!("{label} EXDEV")), "{label} must fail with EXDEV:\n{}", r.describe());
    }
    // No CAP_DAC_READ_SEARCH: ENOENT before the filesystem is even compared.
    assert!(
        out.contains("empty-path ENOENT") || out.contains("empty-path EXDEV"),
        "linkat(AT_EMPTY_PATH) must fail:\n{}",
        r.describe()
    );
    assert!(out.ends_with("[]\n"), "nothing may appear in /workspace:\n{}", r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 6: FIFOs, sockets, device nodes, setuid files in the workspace.

const SPECIAL_FILES: &str = r#"
import errno, os, socket, stat, sys
open("normal.txt", "w").write("normal\n")
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX); s.bind("sock")
for name, mode in (("suid", 0o4755), ("sgid", 0o2755)):
    open(name, "w").write("exit 0\n"); os.chmod(name, mode)
    print(name, oct(os.stat(name).st_mode & 0o7777))
for name, kind, dev in (("null", stat.S_IFCHR, os.makedev(1, 3)), ("disk", stat.S_IFBLK, os.makedev(8, 0))):
    try:
        os.mknod(name, kind | 0o666, dev); print(name, "CREATED")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
# A writer blocked on the FIFO forever: it must not keep the run (or the collection) alive.
if os.fork() == 0:
    open("fifo", "w"); os._exit(0)
print("done", flush=True)
"#;

both!(fn case06_special_files_skipped_by_collection(who) {
    let parent = writable_dir(who);
    let out = parent.path().join("out");
    let r = run_py_collect(who, &out, SPECIAL_FILES, &[], &["--timeout", "20s"]);
    assert_eq!(
        r.expect_ok(),
        "suid 0o4755\nsgid 0o2755\nnull EPERM\ndisk EPERM\ndone\n",
        "device nodes must not be creatable (no CAP_MKNOD):\n{}",
        r.describe()
    );
    assert!(r.elapsed() < Duration::from_secs(15), "a FIFO held cordon up:\n{}", r.describe());
    assert_eq!(r.files(), vec![("normal.txt".to_string(), 7)], "{}", r.describe());
    for (name, why) in [("fifo", "FIFO"), ("sock", "socket"), ("suid", "setuid"), ("sgid", "setgid")] {
        let got = omitted_reason(&r, name);
        assert!(
            got.as_deref().is_some_and(|g| g.contains(why)),
            "{name} must be omitted as {why:?}, got {got:?}:\n{}",
            r.describe()
        );
    }
    assert_eq!(tree(&out), vec![("normal.txt".to_string(), false)], "{}", r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 7: hostile names — input names from the CLI, output names made by the program.

both!(fn case07_hostile_names_rejected_or_omitted(who) {
    let src_dir = shared_tempdir();
    let src = src_dir.path().join("x");
    write_world_readable(&src, b"x");
    let parent = writable_dir(who);
    let out = parent.path().join("out");
    // Invalid UTF-8 and a 4 KiB name on the command line: refused before anything runs.
    let mut bad_utf8 = std::ffi::OsString::from("--file=");
    bad_utf8.push(std::ffi::OsStr::from_bytes(b"bad\xff\xfe.txt="));
    bad_utf8.push(src.as_os_str());
    let long = format!("--file={}={}", "n".repeat(4096), src.display());
    let nested_long = format!("--file={}={}", vec!["d"; 600].join("/"), src.display());
    for (what, arg) in [
        ("invalid UTF-8", bad_utf8),
        ("4 KiB name", long.into()),
        ("1.2 KiB path", nested_long.into()),
    ] {
        let f = cordon_run(who)
            .arg("--lang")
            .arg("python")
            .arg("--output-dir")
            .arg(&out)
            .arg(&arg)
            .arg("-c")
            .arg("open('ran.txt', 'w').write('ran')")
            .run();
        assert!(f.code == 125 || f.code == 2, "{what}: must be refused (125):\n{}", f.describe());
        assert!(!f.stderr.is_empty(), "{what}: the refusal must say why:\n{}", f.describe());
        assert!(!out.join("ran.txt").exists(), "{what}: the code ran:\n{}", f.describe());
    }

    // The program makes hostile output names: invalid UTF-8, deep nesting, a 255-byte name.
    let code = r#"
import os
open(b"bad\xff\xfe.txt", "w").write("x")
open("n" * 255, "w").write("long\n")
open("-rf $(touch pwned) `id`\n.txt", "w").write("odd\n")
os.makedirs("/".join(["d"] * 40))
open("/".join(["d"] * 40) + "/deep.txt", "w").write("deep\n")
print("made")
"#;
    let r = run_py_collect(who, &out, code, &[], &[]);
    assert_eq!(r.expect_ok(), "made\n", "{}", r.describe());
    let om = omitted(&r);
    assert!(
        om.iter().any(|(p, w)| p.starts_with("bad") && w.contains("UTF-8")),
        "the invalid UTF-8 name must be omitted:\n{}",
        r.describe()
    );
    assert!(
        om.iter().any(|(p, w)| p.starts_with("d/d/") && w.contains("deeper")),
        "the 40-level directory must be cut at the depth cap:\n{}",
        r.describe()
    );
    let listed: Vec<String> = r.files().into_iter().map(|(p, _)| p).collect();
    assert!(listed.contains(&"n".repeat(255)), "{}", r.describe());
    assert!(listed.contains(&"-rf $(touch pwned) `id`\n.txt".to_string()), "{}", r.describe());
    assert!(!out.join("pwned").exists() && !Path::new("/pwned").exists(), "a name was run by a shell");
    assert_eq!(std::fs::read(out.join("-rf $(touch pwned) `id`\n.txt")).unwrap(), b"odd\n");
    for (rel, _) in tree(&out) {
        assert!(!rel.contains("bad"), "the invalid UTF-8 name reached the output dir: {rel}");
    }
});

// ---------------------------------------------------------------------------------------------
// Case 8: a sparse 1 TB file and fallocate-until-full.

const FILL: &str = r#"
import errno, os
def t(label, f):
    try:
        print(label, "OK", f())
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
fd = os.open("sparse", os.O_WRONLY | os.O_CREAT, 0o644)
t("truncate-1T", lambda: os.ftruncate(fd, 1 << 40))
t("pwrite-1T", lambda: os.pwrite(fd, b"x", 1 << 40))
fd2 = os.open("full", os.O_WRONLY | os.O_CREAT, 0o644)
n = 0
try:
    while n < 64:
        os.posix_fallocate(fd2, n << 20, 1 << 20); n += 1
    print("fallocate NOT LIMITED")
except OSError as e:
    print("fallocate", errno.errorcode.get(e.errno, e.errno), "after", n, "MiB")
st = os.statvfs("/workspace")
print("used-MiB", (st.f_blocks - st.f_bfree) * st.f_frsize >> 20)
"#;

both!(fn case08_sparse_and_fallocate_hit_the_caps(who) {
    let r = exec_json_run(
        who,
        &["--workspace-size", "8M", "--file-size", "32M"],
        &[PY, "-c", FILL],
    );
    let out = r.expect_ok();
    // RLIMIT_FSIZE (32M) refuses the 1 TB size outright (Python ignores SIGXFSZ: EFBIG).
    assert!(out.contains("truncate-1T EFBIG"), "{}", r.describe());
    assert!(out.contains("pwrite-1T EFBIG"), "{}", r.describe());
    // The workspace tmpfs cap (8M) stops fallocate.
    let line = out.lines().find(|l| l.starts_with("fallocate")).unwrap_or("");
    assert!(line.starts_with("fallocate ENOSPC after"), "{line:?}:\n{}", r.describe());
    let n: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(n <= 8, "{n} MiB fallocated under --workspace-size 8M:\n{}", r.describe());
    let used: u64 = out.lines().last().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(used <= 8, "{used} MiB used under --workspace-size 8M:\n{}", r.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 9: many empty files hit the inode cap; collection of them stays bounded.

both!(fn case09_inode_cap_and_bounded_listing(who) {
    let parent = writable_dir(who);
    let out = parent.path().join("out");
    let code = r#"
import errno
n = 0
try:
    while n < 1000000:
        open("f%07d" % n, "w").close(); n += 1
    print("NOT LIMITED")
except OSError as e:
    print(n, errno.errorcode.get(e.errno, e.errno))
"#;
    let r = run_py_collect(who, &out, code, &[], &["--timeout", "60s"]);
    let line = r.expect_ok().trim().to_string();
    let (n, err) = line.split_once(' ').unwrap_or_else(|| panic!("{}", r.describe()));
    assert_eq!(err, "ENOSPC", "{}", r.describe());
    let n: u64 = n.parse().unwrap();
    assert!((1000..=100_000).contains(&n), "{n} files under the inode cap:\n{}", r.describe());
    assert!(r.elapsed() < Duration::from_secs(30), "{}", r.describe());
    // Collection is capped: at most 1000 files come back, the omitted list is bounded.
    let listed = r.files().len();
    assert!(listed <= 1000, "{listed} files collected:\n{}", r.describe());
    let om = omitted(&r);
    assert!(om.len() <= 200, "{} omitted entries listed", om.len());
    // The rest is counted, not dropped silently, and by a number of its own: no made-up
    // entry (a file may be named `...`) among the omitted.
    let unlisted = r.get("/filesOmittedUnlisted").as_u64().unwrap_or(0);
    assert!(unlisted > 0, "the rest must be counted:\n{}", r.describe());
    assert_eq!(listed as u64 + om.len() as u64 + unlisted, n, "every file is accounted for:\n{}", r.describe());
    assert!(r.finished.stdout.len() < 1 << 20, "the result grew to {} bytes", r.finished.stdout.len());
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), listed, "{}", r.describe());
    // The run is ok, and its message says the output is incomplete, and that /workspace
    // is out of inodes (the ENOSPC the program met).
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        msg.contains("not every file in /workspace was collected") && msg.contains("1000 files"),
        "{}",
        r.describe()
    );
    assert!(
        msg.starts_with("the program exited with code 0, but /workspace is full") && msg.contains("--workspace-inodes"),
        "{}",
        r.describe()
    );

    // /tmp and /dev/shm have their own inode caps (4096 each).
    let code = r#"
import errno
for d in ("/tmp", "/dev/shm"):
    n = 0
    try:
        while n < 100000:
            open("%s/f%06d" % (d, n), "w").close(); n += 1
        print(d, "NOT LIMITED")
    except OSError as e:
        print(d, n, errno.errorcode.get(e.errno, e.errno))
"#;
    let r = exec_json_run(who, &["--timeout", "60s"], &[PY, "-c", code]);
    let out = r.expect_ok();
    for (line, dir) in out.lines().zip(["/tmp", "/dev/shm"]) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((f[0], f.get(2).copied()), (dir, Some("ENOSPC")), "{}", r.describe());
        let n: u64 = f[1].parse().unwrap();
        assert!((1000..4096).contains(&n), "{n} files in {dir}:\n{}", r.describe());
    }
    assert_eq!(out.lines().count(), 2, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        msg.contains("/tmp is full (all of its 4096 files") && msg.contains("/dev/shm is full") && msg.contains("in /workspace instead"),
        "{}",
        r.describe()
    );
});

// ---------------------------------------------------------------------------------------------
// Case 10: nothing survives into the next run; concurrent runs do not share /dev/shm.

both!(fn case10_no_state_survives_or_is_shared(who) {
    sh_ok(who, "for d in /tmp /dev/shm /workspace; do echo s > $d/cordon-left-over; done");
    let r = sh_ok(who, "ls -A /tmp /dev/shm /workspace");
    assert!(!r.output().contains("cordon-left-over"), "state survived a run:\n{}", r.describe());

    // Two concurrent sandboxes each write a token into /dev/shm and /tmp and look for the other's.
    let script = |me: &str| {
        format!(
            "echo x > /dev/shm/tok-{me}; echo x > /tmp/tok-{me}; \
             i=0; while [ $i -lt 15 ]; do sleep 0.1; i=$((i+1)); done; ls -A /dev/shm /tmp | grep tok- | sort | tr '\\n' ' '"
        )
    };
    let a = Cordon::exec(who, &["--json"], &["sh", "-c", &script("A")]);
    let b = Cordon::exec(who, &["--json"], &["sh", "-c", &script("B")]);
    let ha = std::thread::spawn(move || a.run_json());
    let hb = std::thread::spawn(move || b.run_json());
    let (ra, rb) = (ha.join().unwrap(), hb.join().unwrap());
    assert_eq!(ra.expect_ok(), "tok-A tok-A ", "{}", ra.describe());
    assert_eq!(rb.expect_ok(), "tok-B tok-B ", "{}", rb.describe());
});

// ---------------------------------------------------------------------------------------------
// Case 11: a setuid copy of a shell (and the host's own setuid binaries) stays unprivileged.

both!(fn case11_setuid_shell_copy_stays_unprivileged(who) {
    let r = sh_ok(
        who,
        "for d in /workspace /tmp; do cp /bin/dash $d/sh && chmod 4755 $d/sh && \
           $d/sh -p -c 'printf \"%s %s \" $(id -u) $(id -g); grep -E \"^(Uid|CapEff)\" /proc/self/status | tr -s \"\\t\\n\" \"  \"; echo'; done; \
         /usr/bin/su -c 'echo ROOTED' root </dev/null 2>/dev/null; \
         /usr/bin/passwd -S root 2>/dev/null | grep -q . && echo PASSWD-RAN-PRIVILEGED; echo end",
    );
    let out = r.output();
    assert!(!out.contains("ROOTED") && !out.contains("PASSWD-RAN-PRIVILEGED"), "{}", r.describe());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.describe());
    for l in &lines[..2] {
        assert_eq!(
            l.split_whitespace().collect::<Vec<_>>(),
            ["1000", "1000", "Uid:", "1000", "1000", "1000", "1000", "CapEff:", "0000000000000000"],
            "the setuid copy gained privileges:\n{}",
            r.describe()
        );
    }
});

// ---------------------------------------------------------------------------------------------
// Case 29: filling /tmp and /dev/shm counts against the tmpfs cap, not the host's memory.

both!(fn case29_filling_tmp_and_shm_hits_the_cap(who) {
    let r = exec_json_run(
        who,
        &["--tmp-size", "4M", "--file-size", "100M"],
        &[
            "sh",
            "-c",
            "for d in /tmp /dev/shm; do head -c 50000000 /dev/zero > $d/fill 2>/dev/null; \
             echo $d $(stat -c %s $d/fill) $(df -k $d | awk 'NR==2 {print $2}'); done",
        ],
    );
    let out = r.expect_ok();
    for line in out.lines() {
        let f: Vec<u64> = line.split_whitespace().skip(1).map(|s| s.parse().unwrap()).collect();
        assert!(f[0] <= 4 << 20, "{line}: over the 4M cap:\n{}", r.describe());
        assert!(f[1] <= 4 << 10, "{line}: tmpfs size above --tmp-size:\n{}", r.describe());
    }
    assert_eq!(out.lines().count(), 2, "{}", r.describe());
});

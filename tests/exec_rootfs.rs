//! `--rootfs DIR`: an extracted root filesystem instead of the host's /usr. The test builds a
//! tiny one from Debian's busybox-static (installed by .ci/run): one static binary, a shell
//! link, and an /etc/passwd naming the sandbox user.

#[macro_use]
mod common;

use common::*;
use std::path::{Path, PathBuf};

const BUSYBOX: &str = "/bin/busybox";

/// Builds the root in a world-readable temp dir (the test user must be able to read it).
fn tiny_rootfs(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let out = std::process::Command::new(BUSYBOX).arg("--list").output();
    if out.is_err() {
        if std::env::var("CORDON_TEST_REQUIRE_USER").as_deref() == Ok("1") {
            panic!("{test}: {BUSYBOX} is missing; .ci/run installs busybox-static");
        }
        skip_unless_required!("SKIP: {test}: {BUSYBOX} missing (apt-get install busybox-static)");
        return None;
    }
    let dir = shared_tempdir();
    let root = dir.path().join("root");
    for d in ["bin", "etc", "usr"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(BUSYBOX, root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
    write_world_readable(
        &root.join("etc/passwd"),
        b"sandbox:x:1000:1000::/workspace:/bin/sh\n",
    );
    write_world_readable(&root.join("etc/marker"), b"from-the-rootfs\n");
    let mode = |p: &Path, m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    for d in ["", "bin", "etc", "usr"] {
        mode(&root.join(d), 0o755);
    }
    mode(&root.join("bin/busybox"), 0o755);
    Some((dir, root))
}

both!(fn dir_rootfs_is_the_root_and_read_only(who) {
    let Some((_keep, root)) = tiny_rootfs("dir_rootfs_is_the_root_and_read_only") else { return };
    let script = "cat /etc/marker; busybox id -un; busybox ls /; \
                  busybox touch /bin/x 2>/dev/null && echo WROTE-ROOTFS; \
                  echo data > /workspace/f && busybox cat /workspace/f; \
                  test -e /usr/bin/python3 && echo HOST-USR-VISIBLE; echo end";
    let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["sh", "-c", script]);
    let out = r.expect_ok();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "from-the-rootfs", "{}", r.describe());
    assert_eq!(lines[1], "sandbox", "{}", r.describe());
    for entry in ["bin", "dev", "etc", "proc", "tmp", "usr", "workspace"] {
        assert!(lines.contains(&entry), "/ lacks {entry}:\n{}", r.describe());
    }
    assert!(!out.contains("WROTE-ROOTFS"), "the rootfs must be read-only:\n{}", r.describe());
    assert!(out.contains("data"), "/workspace must be writable:\n{}", r.describe());
    assert!(!out.contains("HOST-USR-VISIBLE"), "the host's /usr leaked into a DIR rootfs:\n{}", r.describe());
    assert!(out.ends_with("end\n"), "{}", r.describe());
    // Nothing was written into the rootfs directory on the host.
    assert!(!root.join("bin/x").exists());
    assert!(!root.join("workspace").exists(), "cordon must not create /workspace inside the rootfs dir");
});

both!(fn a_command_missing_from_a_dir_rootfs_names_that_rootfs(who) {
    let Some((_keep, root)) = tiny_rootfs("a_command_missing_from_a_dir_rootfs_names_that_rootfs") else { return };
    let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["python3", "-c", "pass"]);
    assert_eq!(r.code(), 127, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("").to_string();
    assert!(msg.contains("command not found") && msg.contains(root.to_str().unwrap()), "{}", r.describe());
    assert!(!msg.contains("--rootfs host only"), "the advice for the host's rootfs does not apply:\n{}", r.describe());
    // A dynamically linked program whose loader the rootfs lacks: the kernel's ENOENT is
    // told for what it is, the loader named.
    std::fs::copy("/usr/bin/env", root.join("bin/env")).unwrap();
    let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["/bin/env"]);
    assert_eq!(r.code(), 127, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("").to_string();
    assert!(
        msg.contains("cannot execute /bin/env: its interpreter /") && msg.contains("the dynamic loader its ELF header names") && msg.contains(root.to_str().unwrap()),
        "{}",
        r.describe()
    );
    // A script whose interpreter is there but cannot start: the missing loader is named.
    write_world_readable(&root.join("bin/s"), b"#!/bin/env sh\n");
    std::fs::set_permissions(root.join("bin/s"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["/bin/s"]);
    assert_eq!(r.code(), 127, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("its interpreter /bin/env (its #! line) is in the sandbox, but the dynamic loader of /bin/env"), "{}", r.describe());
});

both!(
    /// A socket or FIFO at the top of a rootfs directory is left out: bound in, the socket
    /// was a channel to the host process listening on it, even with no network (Landlock
    /// does not govern connecting by path). A regular file beside them is still there.
    fn special_files_at_the_top_of_a_rootfs_are_left_out(who) {
        let Some((_keep, root)) = tiny_rootfs("special_files_at_the_top_of_a_rootfs_are_left_out")
        else {
            return;
        };
        let listener = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
        nix::unistd::mkfifo(&root.join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o666))
            .unwrap();
        write_world_readable(&root.join("top-file"), b"plain\n");
        let script = "for e in sock fifo top-file; do test -e /$e && echo HAS-$e; done; echo end";
        let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["sh", "-c", script]);
        assert_eq!(r.expect_ok(), "HAS-top-file\nend\n", "{}", r.describe());
        drop(listener);
    }
);

both!(
    /// A regular file at the top of a rootfs directory is copied in (a private inode: no
    /// shared locks), read-only, byte for byte, up to 4 MiB; one over 4 MiB, or more than the
    /// root's 8 MiB in all, is refused, saying why. (The root's tmpfs was 1 MiB: every file
    /// over about 1 MiB failed with a bare ENOSPC.)
    fn top_level_files_are_copied_in_up_to_4_mib(who) {
        let Some((_keep, root)) = tiny_rootfs("top_level_files_are_copied_in_up_to_4_mib") else {
            return;
        };
        // Not a repeating pattern, so a short or shifted copy shows in the checksum.
        let data: Vec<u8> = (0u32..300_000).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        write_world_readable(&root.join("top-file"), &data);
        let script = "busybox stat -c '%a %s' /top-file; busybox md5sum /top-file; \
                      echo x >> /top-file 2>/dev/null && echo WROTE; echo end";
        let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["sh", "-c", script]);
        let out = r.expect_ok();
        let digest = {
            let o = std::process::Command::new("md5sum").arg(root.join("top-file")).output().unwrap();
            String::from_utf8(o.stdout).unwrap().split(' ').next().unwrap().to_string()
        };
        assert_eq!(out, format!("444 300000\n{digest}  /top-file\nend\n"), "{}", r.describe());

        // 4 MiB exactly is copied; one byte more is refused.
        write_world_readable(&root.join("top-file"), &vec![7u8; 4 << 20]);
        let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["busybox", "stat", "-c", "%s", "/top-file"]);
        assert_eq!(r.expect_ok(), format!("{}\n", 4 << 20), "{}", r.describe());
        write_world_readable(&root.join("top-file"), &vec![7u8; (4 << 20) + 1]);
        let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["busybox", "true"]);
        assert_eq!(r.code(), 125, "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("top-file") && msg.contains("at most 4 MiB"), "{}", r.describe());
        // Files that fit one by one but not together: the message says what to do.
        for name in ["top-file", "top-file2", "top-file3"] {
            write_world_readable(&root.join(name), &vec![7u8; 4 << 20]);
        }
        let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["busybox", "true"]);
        assert_eq!(r.code(), 125, "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("ENOSPC") && msg.contains("put large files in a directory"), "{}", r.describe());
    }
);

both!(fn missing_rootfs_dir_is_a_cordon_error(who) {
    let r = exec_json_run(who, &["--rootfs", "/nonexistent/cordon-rootfs"], &["true"]);
    assert_eq!(r.code(), 125, "{}", r.describe());
    assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("/nonexistent/cordon-rootfs") && msg.contains("--rootfs"), "{}", r.describe());
    // In exec's terms: no word of cordon run's profiles.
    assert!(msg.contains("No such file or directory") && !msg.contains("profile"), "{}", r.describe());
});

/// Host overlay mounts made for a test, unmounted (innermost first) when dropped.
struct HostMounts(Vec<PathBuf>);

impl Drop for HostMounts {
    fn drop(&mut self) {
        for m in self.0.iter().rev() {
            let _ = std::process::Command::new("umount").arg(m).status();
        }
    }
}

both!(fn overlay_refused_is_an_error_or_an_allowed_downgrade(who) {
    const TEST: &str = "overlay_refused_is_an_error_or_an_allowed_downgrade";
    if !running_as_root() {
        skip!("SKIP: {TEST}: needs root to stack overlays on the host");
        return;
    }
    let Some((keep, root)) = tiny_rootfs(TEST) else { return };
    // The kernel stacks at most two overlays: a rootfs that is already an overlay of an
    // overlay makes cordon's own overlay of it fail (EINVAL), as a kernel without overlayfs in
    // user namespaces would.
    let base = keep.path();
    let mut mounts = HostMounts(Vec::new());
    let mut lower = root.clone();
    for level in ["a", "b"] {
        let empty = base.join(format!("empty-{level}"));
        let top = base.join(format!("stack-{level}"));
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::create_dir_all(&top).unwrap();
        let opts = format!("ro,lowerdir={}:{}", lower.display(), empty.display());
        let ok = std::process::Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&top)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mount the test's overlay {}", top.display());
        mounts.0.push(top.clone());
        lower = top;
    }
    let stacked = lower.to_str().unwrap().to_string();
    let script = ["sh", "-c", "cat /etc/marker"];
    // Refused by default, naming the mechanism and the way out.
    let r = exec_json_run(who, &["--rootfs", &stacked], &script);
    assert_eq!(r.code(), 125, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("overlay") && msg.contains("--allow-degraded overlay"), "{}", r.describe());
    // Accepted downgrade: read-only binds, said in the result.
    let r = exec_json_run(who, &["--rootfs", &stacked, "--allow-degraded", "overlay"], &script);
    assert_eq!(r.expect_ok(), "from-the-rootfs\n", "{}", r.describe());
    let views = r.get("/isolation/hostViews").as_str().unwrap_or("");
    assert!(views.starts_with("read-only binds") && views.contains("--allow-degraded overlay"), "{}", r.describe());
    // The usual case says what it is.
    let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &script);
    assert_eq!(r.get("/isolation/hostViews").as_str(), Some("private read-only overlays"), "{}", r.describe());
    drop(mounts);
});

// Case 11 with a setuid-root program: a root filesystem may hold setuid-root binaries (su,
// passwd, mount). A static probe, owned by host root and mode 4755, prints its real and
// effective uid and its capabilities. Run by an unprivileged user on the host it is root (the
// control: the attack works outside); in the sandbox it stays the sandbox user, no capability.
const SUID_PROBE: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    printf("%d %d", (int)getuid(), (int)geteuid());
    FILE *f = fopen("/proc/self/status", "r");
    char l[256];
    while (f && fgets(l, sizeof l, f))
        if (!strncmp(l, "CapEff:", 7) || !strncmp(l, "CapPrm:", 7)) {
            l[strcspn(l, "\n")] = 0;
            printf(" %s", l);
        }
    printf("\n");
    return 0;
}
"#;

both!(fn a_setuid_root_binary_in_the_rootfs_stays_unprivileged(who) {
    let test = "a_setuid_root_binary_in_the_rootfs_stays_unprivileged";
    if !running_as_root() {
        skip!("SKIP: {test}: only root can make a setuid-root file");
        return;
    }
    let Some((_keep, root)) = tiny_rootfs(test) else { return };
    // The control needs a filesystem that honours setuid bits (a nosuid /tmp does not).
    let vfs = nix::sys::statvfs::statvfs(&root).unwrap();
    if vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_NOSUID) {
        skip!("SKIP: {test}: {} is on a nosuid filesystem", root.display());
        return;
    }
    let src = root.join("probe.c");
    std::fs::write(&src, SUID_PROBE).unwrap();
    let probe = root.join("bin/suid-probe");
    let cc = std::process::Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(&probe)
        .arg(&src)
        .output();
    match cc {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("gcc -static failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) if std::env::var("CORDON_TEST_REQUIRE_USER").as_deref() == Ok("1") => {
            panic!("{test}: gcc: {e}; .ci/run installs gcc and libc6-dev")
        }
        Err(e) => {
            skip_unless_required!("SKIP: {test}: gcc: {e} (apt-get install gcc libc6-dev)");
            return;
        }
    }
    std::fs::remove_file(&src).unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let meta = std::fs::metadata(&probe).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o4755));
    // The control: on the host, the test user running it becomes root.
    if let Some(u) = test_user() {
        let out = std::process::Command::new("setpriv")
            .args([format!("--reuid={}", u.uid), format!("--regid={}", u.gid), "--clear-groups".into()])
            .arg(&probe)
            .output()
            .unwrap();
        let host = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            host.starts_with(&format!("{} 0 ", u.uid)),
            "the probe must be a working setuid-root program on the host: {host}"
        );
    }
    let r = exec_json_run(who, &["--rootfs", root.to_str().unwrap()], &["/bin/suid-probe"]);
    let out = r.expect_ok();
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["1000", "1000", "CapPrm:", "0000000000000000", "CapEff:", "0000000000000000"],
        "the setuid-root binary gained privileges in the sandbox:\n{}",
        r.describe()
    );
});

// --ro-bind over a name the rootfs directory already has is refused: it would hide that
// entry, or, through a symlink such as `data -> workspace`, land on /workspace itself.
both!(fn ro_bind_may_not_take_a_name_of_the_rootfs(who) {
    let Some((keep, root)) = tiny_rootfs("ro_bind_may_not_take_a_name_of_the_rootfs") else { return };
    std::os::unix::fs::symlink("workspace", root.join("data")).unwrap();
    std::fs::create_dir(root.join("opt")).unwrap();
    let src = keep.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let root_arg = root.to_str().unwrap();
    for (dst, says) in [("/data", "already has /data"), ("/etc", "kept for the sandbox's own root"), ("/opt", "already has /opt")] {
        let bind = format!("{}:{dst}", src.display());
        let plain = exec_plain(who, &["--rootfs", root_arg, "--ro-bind", &bind], &["sh", "-c", "echo RAN"]);
        assert_eq!(plain.code, 125, "{dst}:\n{}", plain.describe());
        assert!(!plain.stdout_str().contains("RAN"), "{dst}:\n{}", plain.describe());
        assert!(plain.stderr_str().contains(says), "{dst}: must say {says:?}:\n{}", plain.describe());
    }
    let bind = format!("{}:/fresh", src.display());
    let r = exec_json_run(who, &["--rootfs", root_arg, "--ro-bind", &bind], &["sh", "-c", "test -d /fresh && echo ok"]);
    assert_eq!(r.expect_ok(), "ok\n", "{}", r.describe());
});

/// Copies the host's `flock` (util-linux) and the libraries `ldd` names into `root`, at
/// their host paths: a locking tool for a busybox root, whose busybox has none.
fn add_flock(root: &Path) {
    let ldd = std::process::Command::new("ldd")
        .arg("/usr/bin/flock")
        .output()
        .expect("ldd");
    let text = String::from_utf8_lossy(&ldd.stdout).into_owned();
    let libs = text.split_whitespace().filter(|w| w.starts_with('/'));
    for file in std::iter::once("/usr/bin/flock").chain(libs) {
        // The real file, at the path the loader looks for (lib64 is a link on merged-/usr).
        let to = root.join(file.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(std::fs::canonicalize(file).unwrap(), &to).unwrap();
        let mut p = to.parent().unwrap();
        while p != root {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            p = p.parent().unwrap();
        }
        std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
}

// A rootfs directory's own directories are shown through one read-only overlay of the whole
// rootfs, made for this sandbox (where the kernel can copy a detached mount; one overlay
// per directory before): every one is an overlay, and a lock on a file of it stays the
// sandbox's own, neither another sandbox's nor the host's.
both!(fn a_dir_rootfs_is_one_private_overlay(who) {
    let Some((_keep, root)) = tiny_rootfs("a_dir_rootfs_is_one_private_overlay") else { return };
    add_flock(&root);
    let rootfs = root.to_str().unwrap();
    let r = exec_json_run(who, &["--rootfs", rootfs], &["busybox", "cat", "/proc/self/mountinfo"]);
    let info = r.expect_ok().to_string();
    let mut devices = std::collections::BTreeSet::new();
    for dir in ["/bin", "/etc", "/usr", "/lib", "/lib64"] {
        let line = info
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(dir))
            .unwrap_or_else(|| panic!("{dir} is not a mount:\n{}", r.describe()));
        let fstype = line.split(" - ").nth(1).and_then(|t| t.split(' ').next());
        assert_eq!(fstype, Some("overlay"), "{line}\n{}", r.describe());
        devices.insert(line.split(' ').nth(2).unwrap().to_string());
    }
    if kernel_copies_detached_mounts() {
        assert_eq!(devices.len(), 1, "one overlay for the whole rootfs:\n{}", r.describe());
    }

    let mut a = Cordon::exec(who, &["--rootfs", rootfs], &["flock", "-x", "/etc/marker", "sh", "-c", "echo held; sleep 3"]).hold();
    a.wait_for_line("held");
    let host = std::process::Command::new("flock")
        .args(["-n", "-s"])
        .arg(root.join("etc/marker"))
        .arg("true")
        .status()
        .unwrap();
    let b = exec_json_run(who, &["--rootfs", rootfs], &["sh", "-c", "flock -n -x /etc/marker sh -c 'echo free' || echo busy"]);
    let fa = a.finish();
    assert_eq!((fa.code, fa.stdout_str().as_str()), (0, "held\n"), "{}", fa.describe());
    assert_eq!(b.expect_ok(), "free\n", "sandbox B saw sandbox A's lock:\n{}", b.describe());
    assert!(host.success(), "a sandbox's flock blocked a host process");
    // Within one sandbox a lock still holds.
    let r = exec_json_run(who, &["--rootfs", rootfs], &["flock", "-x", "/etc/marker", "sh", "-c", "flock -n -x /etc/marker sh -c 'echo not-exclusive' || echo exclusive"]);
    assert_eq!(r.expect_ok(), "exclusive\n", "{}", r.describe());
});

//! `cordon doctor [--json]`: one report of every mechanism cordon relies on, what is available
//! to this caller, and the fix for what is not.
//!
//! The shape checked here is main's (as of the merge of the limits backends):
//!
//! ```text
//! { ready: bool, uid: int, kernel: str,
//!   checks: [ { name, ok: bool, required: bool, detail: str, fix?: str, explanation?: str } ],
//!                                                            // user-namespace-sysctls,
//!                                                            // namespaces, overlay, seccomp, landlock, rlimit-fallback,
//!                                                            // memory-watch
//!   limits: { version, uid, cgroupRoot, v2Mount, v2Cgroup,
//!             controllers: [ { name, exists, hierarchy, cgroup, writable, fix? } ],
//!             cgroupV2: { available, reason?, fix? }, cgroupV1: { available, reason?, fix? },
//!             autoBackend: "cgroup-v2" | "cgroup-v1" | "rlimit" } }
//! ```

#[macro_use]
mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

fn doctor_json(who: Who) -> (Value, Finished) {
    let f = Cordon::new(who)
        .arg("doctor")
        .arg("--json")
        .deadline(Duration::from_secs(30))
        .run();
    let v: Value = serde_json::from_slice(&f.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}):\n{}", f.describe()));
    assert!(
        v.is_object(),
        "doctor --json must print an object:\n{}",
        f.describe()
    );
    (v, f)
}

fn nonempty_str(v: &Value) -> bool {
    v.as_str().is_some_and(|s| !s.trim().is_empty())
}

both!(fn doctor_json_checks_every_mechanism(who) {
    let (v, f) = doctor_json(who);
    let checks = v["checks"].as_array().unwrap_or_else(|| panic!("no checks array:\n{}", f.describe()));
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    for want in ["namespaces", "sandbox-ids", "network-namespace", "overlay", "seccomp", "landlock"] {
        assert!(names.contains(&want), "doctor has no {want:?} check: {names:?}");
    }
    // A run's network namespace is made by a helper that joins the sandbox's user namespace:
    // this host (and CI's, and the cgroup v2 guest's) allows it, as cordon exec relies on it.
    // The sandbox's ids: the caller's own for a user, a per-run id of root's own for root.
    let ids = checks.iter().find(|c| c["name"] == "sandbox-ids").unwrap();
    assert_eq!(ids["ok"], true, "{ids}");
    let want = match who {
        Who::Root => "this run's own",
        Who::User => "the caller's own ids",
    };
    assert!(ids["detail"].as_str().is_some_and(|d| d.contains(want)), "{ids}");
    let netns = checks.iter().find(|c| c["name"] == "network-namespace").unwrap();
    assert_eq!(netns["ok"], true, "{netns}");
    // This kernel (and CI's, and the cgroup v2 guest's) overlays in user namespaces; the
    // probe must say so, as cordon exec relies on it.
    let overlay = checks.iter().find(|c| c["name"] == "overlay").unwrap();
    assert_eq!(overlay["ok"], true, "{overlay}");
    // The memory watch's socket count (sock_diag): the handlers load on demand here, and the
    // cgroup v2 guest loads them; required exactly when this caller gets the rlimit backend.
    let watch = checks
        .iter()
        .find(|c| c["name"] == "memory-watch")
        .unwrap_or_else(|| panic!("doctor has no memory-watch check: {names:?}"));
    assert_eq!(watch["ok"], true, "{watch}");
    assert_eq!(watch["required"], v["limits"]["autoBackend"] == "rlimit", "{watch}\n{}", f.describe());
    assert!(
        names.iter().any(|n| n.contains("user-namespace") || n.contains("userns")),
        "doctor has no user-namespace check (sysctls / AppArmor): {names:?}"
    );
    for c in checks {
        assert!(c["ok"].is_boolean() && c["required"].is_boolean(), "check without ok/required: {c}");
        assert!(nonempty_str(&c["detail"]), "check without a detail: {c}");
        if c["ok"] == false {
            assert!(nonempty_str(&c["fix"]), "a failing check must give the fix: {c}");
        }
    }
    assert_eq!(v["uid"], who.caller_uid(), "doctor must report the caller's uid:\n{}", f.describe());
    assert!(v["ready"].is_boolean(), "{}", f.describe());
});

both!(fn doctor_json_cgroup_report_gives_reasons_and_fixes(who) {
    let (v, f) = doctor_json(who);
    let limits = &v["limits"];
    assert!(limits.is_object(), "no limits section:\n{}", f.describe());
    for key in ["cgroupV2", "cgroupV1"] {
        let b = &limits[key];
        assert!(b["available"].is_boolean(), "limits.{key}.available:\n{}", f.describe());
        if b["available"] == false {
            assert!(nonempty_str(&b["reason"]), "limits.{key} unavailable without a reason:\n{}", f.describe());
            assert!(nonempty_str(&b["fix"]), "limits.{key} unavailable without a fix:\n{}", f.describe());
        }
    }
    let controllers = limits["controllers"].as_array().unwrap_or_else(|| panic!("no controllers:\n{}", f.describe()));
    for want in ["memory", "pids", "cpu"] {
        let c = controllers
            .iter()
            .find(|c| c["name"] == want)
            .unwrap_or_else(|| panic!("controller {want} not reported:\n{}", f.describe()));
        assert!(c["writable"].is_boolean(), "{c}");
        if c["exists"] == true && c["writable"] == false {
            assert!(nonempty_str(&c["fix"]), "a non-writable controller must give the fix: {c}");
        }
    }
    if cgroup_layout() == CgroupLayout::HybridOrV1 {
        assert_eq!(limits["cgroupV2"]["available"], false, "the hybrid host's v2 has no controllers:\n{}", f.describe());
        assert_eq!(limits["cgroupV1"]["available"], who == Who::Root, "v1 is usable by root only:\n{}", f.describe());
    }
});

both!(fn doctor_predicts_the_exec_backend(who) {
    let (v, f) = doctor_json(who);
    let predicted = v["limits"]["autoBackend"].as_str().unwrap_or_else(|| panic!("no autoBackend:\n{}", f.describe()));
    let r = exec_json_run(who, &[] as &[&str], &["true"]);
    r.expect_ok();
    assert_eq!(predicted, r.backend(), "doctor's autoBackend must be what exec uses:\n{}", r.describe());
    if let Some(expected) = expected_auto_backend(who) {
        assert_eq!(predicted, expected, "{}", f.describe());
    }
});

both!(fn doctor_reports_the_rlimit_fallback(who) {
    // The issue asks doctor to say whether the rlimit fallback is available, for every caller
    // (not only when it is the backend `auto` picks). rlimits need no privilege: always ok.
    let (v, f) = doctor_json(who);
    let checks = v["checks"].as_array().cloned().unwrap_or_default();
    let check = checks
        .iter()
        .find(|c| c["name"].as_str().is_some_and(|n| n.contains("rlimit")))
        .unwrap_or_else(|| panic!("doctor --json has no rlimit-fallback check:\n{}", f.describe()));
    assert_eq!(check["ok"], true, "rlimits are always available: {check}");
    assert!(nonempty_str(&check["detail"]), "{check}");
    // The whole account of the memory watch, which each rlimit-backend result's memory note
    // gives in brief and sends the reader to: what it counts, refuses and cannot count.
    let x = check["explanation"].as_str().unwrap_or_else(|| panic!("no explanation: {check}"));
    for said in [
        "Memory without a cgroup: the polled watch",
        "Pss_Anon + Pss_Shmem + SwapPss",
        "memfd_create",
        "landlock_create_ruleset",
        "splice and sendfile answer EINVAL",
        "SO_SNDBUF, SO_ZEROCOPY and MSG_OOB answer EOPNOTSUPP",
        "/dev/zero is the host's /dev/full",
        "kernel.shmmax",
        "--allow-degraded socket-memory",
        "TCP sockets answer EACCES",
    ] {
        assert!(x.contains(said), "no {said:?} in the explanation: {x}");
    }
    // Printed as it is, wrapped, by the plain doctor too, for a caller who gets the rlimit
    // backend; one with a cgroup is told where to find it instead.
    let f = Cordon::new(who).arg("doctor").deadline(Duration::from_secs(30)).run();
    let plain = f.stdout_str().split_whitespace().collect::<Vec<_>>().join(" ");
    if v["limits"]["autoBackend"] == "rlimit" {
        assert!(plain.contains(x), "{}", f.describe());
    } else {
        assert!(!plain.contains(x) && plain.contains("how --memory is held without a cgroup: `cordon doctor --json`"), "{}", f.describe());
    }
});

both!(fn doctor_exit_code_and_plain_output_agree_with_ready(who) {
    let (v, fj) = doctor_json(who);
    let ready = v["ready"].as_bool().unwrap_or_else(|| panic!("no ready:\n{}", fj.describe()));
    let checks = v["checks"].as_array().cloned().unwrap_or_default();
    let required_ok = checks.iter().filter(|c| c["required"] == true).all(|c| c["ok"] == true);
    assert_eq!(ready, required_ok, "ready must be true exactly when every required check passes:\n{}", fj.describe());
    assert_eq!(fj.code == 0, ready, "doctor --json exits 0 exactly when ready:\n{}", fj.describe());

    let f = Cordon::new(who).arg("doctor").deadline(Duration::from_secs(30)).run();
    let text = f.stdout_str().to_lowercase();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "plain doctor output should not be JSON");
    for word in ["namespace", "seccomp", "landlock", "cgroup"] {
        assert!(text.contains(word), "plain doctor output does not mention {word}:\n{}", f.describe());
    }
    assert_eq!(f.code, fj.code, "plain and --json doctor must agree:\n{}", f.describe());
    // The verdict does not call rlimits exact limits.
    if ready {
        let rlimit = v["limits"]["autoBackend"] == "rlimit";
        assert_eq!(text.contains("its limits are rlimits"), rlimit, "{}", f.describe());
        assert_eq!(text.contains("exact limits"), !rlimit, "{}", f.describe());
    }
});

#[test]
fn printing_commands_end_quietly_when_the_reader_is_gone() {
    // stdout is a pipe whose read end is already closed: the first write fails (EPIPE).
    for args in [&["doctor"][..], &["profiles"][..], &["oci", "features"][..]] {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        drop(r);
        let out = std::process::Command::new(cordon_bin())
            .args(args)
            .stdout(std::process::Stdio::from(w))
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run cordon");
        let err = String::from_utf8_lossy(&out.stderr);
        // Quietly: nothing at all on stderr (no panic, no "failed printing", no EPIPE
        // message), and the death of SIGPIPE or a plain exit, as `yes | head -1` ends.
        assert_eq!(err, "", "cordon {args:?} wrote to stderr");
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal() == Some(libc::SIGPIPE) || out.status.code().is_some(),
            "cordon {args:?}: {:?}",
            out.status
        );
    }
}

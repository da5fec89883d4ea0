//! `cordon doctor [--json]`: one report of every mechanism cordon relies on, what is available
//! to this caller, and the fix for what is not.
//!
//! ASSUMED SHAPE (written before `doctor` existed on main): a JSON object whose text names user
//! namespaces, seccomp, Landlock and cgroups. The key-level checks below are adapted to the real
//! output once main has it; see the per-test comments.

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

both!(fn doctor_json_names_every_mechanism(who) {
    let (v, f) = doctor_json(who);
    let text = v.to_string().to_lowercase();
    for (what, words) in [
        ("user namespaces", &["user namespace", "user_namespace", "userns", "usernamespace"][..]),
        ("seccomp", &["seccomp"]),
        ("landlock", &["landlock"]),
        ("cgroup", &["cgroup"]),
        ("rlimit fallback", &["rlimit"]),
    ] {
        assert!(words.iter().any(|w| text.contains(w)), "doctor --json does not mention {what}:\n{}", f.describe());
    }
});

both!(fn doctor_plain_is_human_readable(who) {
    let f = Cordon::new(who).arg("doctor").deadline(Duration::from_secs(30)).run();
    let text = f.stdout_str().to_lowercase();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "plain doctor output should not be JSON");
    for word in ["seccomp", "landlock", "cgroup"] {
        assert!(text.contains(word), "plain doctor output does not mention {word}:\n{}", f.describe());
    }
    // Everything cordon needs works on this machine for both callers: doctor must not fail.
    assert_eq!(f.code, 0, "{}", f.describe());
});

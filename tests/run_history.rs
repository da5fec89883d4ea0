//! `cordon history`, as root and as the unprivileged user: every `cordon run` appends a record
//! (executionId, timestamp, language, codeLength, success, status, executionTime, cpuTime,
//! memoryUsed); `--no-history` does not. SKIPs (with a printed line) while the build has no
//! history yet.

#[macro_use]
mod common;

use common::*;
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// `cordon SUBCOMMAND …` as `who`. `setpriv` keeps root's environment (HOME=/root), so the
/// unprivileged user gets its own HOME and XDG directories: its history lives there.
fn cordon(who: Who, subcommand: &str) -> Cordon {
    Cordon::new(who).arg(subcommand)
}

/// `cordon history --last N --json` → the records, oldest first (JSON lines, or one array).
fn history(who: Who, last: usize) -> Vec<Value> {
    let f = cordon(who, "history")
        .arg("--last")
        .arg(last.to_string())
        .arg("--json")
        .run();
    assert_eq!(f.code, 0, "cordon history failed:\n{}", f.describe());
    let out = f.stdout_str();
    if let Ok(Value::Array(records)) = serde_json::from_str::<Value>(&out) {
        return records;
    }
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!(
                    "history --json: a line is not JSON ({e}): {l:?}\n{}",
                    f.describe()
                )
            })
        })
        .collect()
}

/// True when this build has a history (main had only a placeholder before the history merge).
fn history_available(who: Who, test: &str) -> bool {
    let f = cordon(who, "history")
        .arg("--last")
        .arg("1")
        .arg("--json")
        .run();
    if f.code != 0 && f.stderr_str().contains("not available") {
        skip!(
            "SKIP: {test}: this build has no history yet ({})",
            f.stderr_str().trim()
        );
        return false;
    }
    true
}

fn nonce() -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{t}-{}", std::process::id())
}

/// Runs python `code` with --json (plus `opts`); returns the run.
fn run_python(who: Who, code: &str, opts: &[&str]) -> JsonRun {
    let mut c = cordon(who, "run").arg("--lang").arg("python").arg("--json");
    for o in opts {
        c = c.arg(o);
    }
    c.arg("-c").arg(code).run_json()
}

fn execution_id(r: &JsonRun) -> String {
    let id = r.get("/executionId").as_str().unwrap_or("").to_string();
    assert!(
        !id.is_empty(),
        "a recorded run needs an executionId:\n{}",
        r.describe()
    );
    id
}

/// Runs `code` and returns (its run, the newest history record). The history of root is
/// shared with every other root run on the machine: when another run slipped in between (the
/// id is among the recent records but not the newest), try again, up to three times.
fn run_and_read_latest(who: Who, code: &str) -> (JsonRun, Value) {
    for attempt in 1..=3 {
        let r = run_python(who, code, &[]);
        let id = execution_id(&r);
        let latest = history(who, 1);
        assert_eq!(
            latest.len(),
            1,
            "history --last 1 must print one record: {latest:?}"
        );
        if latest[0]["executionId"] == json!(id) {
            return (r, latest[0].clone());
        }
        let recent = history(who, 50);
        assert!(
            recent.iter().any(|rec| rec["executionId"] == json!(id)),
            "run {id} is not in the last 50 history records: {recent:#?}\n{}",
            r.describe()
        );
        println!("note: attempt {attempt}: another run was recorded after {id}; retrying");
    }
    panic!("three attempts in a row were overtaken by concurrent runs in the history");
}

both!(
    /// After a run, `history --last 1 --json` shows its executionId and what happened; a
    /// failing run is recorded as such; `--no-history` records nothing.
    fn history_records_runs(who) {
        if !history_available(who, &format!("{}::{who:?}", module_path!())) {
            return;
        }
        let code = format!("print('history {}')", nonce());
        let (r, rec) = run_and_read_latest(who, &code);
        r.expect_ok();
        assert_eq!(rec["language"], json!("python"), "{rec:#}");
        assert_eq!(rec["codeLength"], json!(code.len()), "{rec:#}");
        assert_eq!(rec["success"], json!(true), "{rec:#}");
        assert_eq!(rec["status"], json!("ok"), "{rec:#}");
        assert!(rec["executionTime"].is_number(), "{rec:#}");
        assert!(
            rec["timestamp"].as_str().is_some_and(|t| t.len() >= 10),
            "a timestamp: {rec:#}"
        );
        for k in ["cpuTime", "memoryUsed"] {
            assert!(
                rec.get(k).is_some_and(|v| v.is_number() || v.is_null()),
                "{k} must be present (a number, or null when not measured): {rec:#}"
            );
        }

        // A failure is recorded with its status.
        let fail = format!("import sys\nprint('history-fail {}')\nsys.exit(3)", nonce());
        let (r, rec) = run_and_read_latest(who, &fail);
        assert_eq!(r.status(), "runtime_error", "{}", r.describe());
        assert_eq!(rec["success"], json!(false), "{rec:#}");
        assert_eq!(rec["status"], json!("runtime_error"), "{rec:#}");
        // With the program's exit code, which tells one failure from another.
        assert_eq!(rec["exitCode"], json!(3), "{rec:#}");
        assert_eq!(rec.get("compileCached"), None, "python compiles nothing: {rec:#}");

        // --no-history: the run happens, nothing is recorded.
        let quiet = run_python(who, &format!("print('quiet {}')", nonce()), &["--no-history"]);
        quiet.expect_ok();
        let quiet_id = quiet.get("/executionId").as_str().unwrap_or("").to_string();
        let recent = history(who, 50);
        if !quiet_id.is_empty() {
            assert!(
                !recent.iter().any(|rec| rec["executionId"] == json!(quiet_id)),
                "a --no-history run was recorded: {recent:#?}"
            );
        }

        // The table form names the language.
        let table = cordon(who, "history").arg("--last").arg("1").run();
        assert_eq!(table.code, 0, "{}", table.describe());
        assert!(table.stdout_str().contains("python"), "{}", table.describe());
        let header = table.stdout_str().lines().next().unwrap_or("").to_string();
        assert!(header.starts_with("ENDED") && header.contains("EXIT"), "{}", table.describe());
    }
);

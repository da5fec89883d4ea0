//! The result of `cordon exec`: exit codes (with and without --json), statuses, stdin, and the
//! shape of the `--json` result object.

#[macro_use]
mod common;

use common::*;
use serde_json::{Value, json};

both!(fn exit_code_passes_through(who) {
    let plain = exec_plain(who, &[] as &[&str], &["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(plain.code, 7, "{}", plain.describe());
    assert_eq!(plain.stdout_str(), "out\n", "stdout must pass through:\n{}", plain.describe());
    assert!(plain.stderr_str().contains("err\n"), "stderr must pass through:\n{}", plain.describe());

    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(r.code(), 7, "{}", r.describe());
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    assert_eq!(r.get("/exitCode"), &json!(7), "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    assert_eq!(r.output(), "out\n", "{}", r.describe());
    assert_eq!(r.error(), "err\n", "{}", r.describe());
});

both!(fn exit_zero_is_ok(who) {
    let plain = exec_plain(who, &[] as &[&str], &["true"]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let r = exec_json_run(who, &[] as &[&str], &["true"]);
    r.expect_ok();
    assert_eq!(r.get("/success"), &json!(true), "{}", r.describe());
    assert_eq!(r.get("/exitCode"), &json!(0), "{}", r.describe());
});

both!(fn killed_by_signal_is_128_plus_n(who) {
    let plain = exec_plain(who, &[] as &[&str], &["sh", "-c", "kill -SEGV $$"]);
    assert_eq!(plain.code, 139, "{}", plain.describe());

    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "kill -SEGV $$"]);
    assert_eq!(r.code(), 139, "{}", r.describe());
    assert_eq!(r.status(), "signaled", "{}", r.describe());
    assert_eq!(r.get("/signal"), &json!(11), "{}", r.describe());
    assert_eq!(r.get("/signalName"), &json!("SIGSEGV"), "{}", r.describe());
    assert_eq!(r.get("/exitCode"), &Value::Null, "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    // Said as a shell says it (on stderr without --json), except SIGPIPE, which a shell
    // leaves unsaid (`| head`).
    let says = "the program was killed by SIGSEGV: segmentation fault";
    assert!(r.get("/message").as_str().unwrap_or("").starts_with(says), "{}", r.describe());
    assert!(plain.stderr_str().contains(&format!("cordon: signaled: {says}")), "{}", plain.describe());
    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "kill -KILL $$"]);
    assert_eq!((r.status(), r.code()), ("signaled", 137), "{}", r.describe());
    assert!(r.get("/message").as_str().unwrap_or("").contains("not sent by cordon, as no limit was reached"), "{}", r.describe());
    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "kill -PIPE $$"]);
    assert_eq!((r.status(), r.code(), r.get("/message")), ("signaled", 141, &Value::Null), "{}", r.describe());
});

// `cordon exec -- python3 main.py` beside main.py: the sandbox's /workspace does not have it,
// and the message says how to bring it in. Not for a name that is nowhere.
both!(fn a_file_left_on_the_host_is_named(who) {
    let dir = shared_tempdir();
    write_world_readable(&dir.path().join("main.py"), b"print(1)\n");
    for arg in ["main.py", "./main.py"] {
        let r = Cordon::exec(who, &["--json"], &["python3", arg]).current_dir(dir.path()).run_json();
        assert_eq!(r.status(), "runtime_error", "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("`main.py` is a file in cordon's working directory on the host") && msg.contains("--file main.py=main.py"), "{}", r.describe());
    }
    let r = Cordon::exec(who, &["--json"], &["python3", "elsewhere.py"]).current_dir(dir.path()).run_json();
    assert_eq!((r.status(), r.get("/message")), ("runtime_error", &Value::Null), "{}", r.describe());
    let r = Cordon::exec(who, &["--json", "--file", "main.py=main.py"], &["python3", "main.py"]).current_dir(dir.path()).run_json();
    assert_eq!(r.expect_ok(), "1\n", "{}", r.describe());
});

both!(fn command_not_found_is_127(who) {
    for cmd in ["/nonexistent/cordon-no-such-program", "cordon-no-such-program"] {
        let plain = exec_plain(who, &[] as &[&str], &[cmd]);
        assert_eq!(plain.code, 127, "{}", plain.describe());
        assert!(!plain.stderr.is_empty(), "cordon must say why it exits 127:\n{}", plain.describe());
        let r = exec_json_run(who, &[] as &[&str], &[cmd]);
        assert_eq!(r.code(), 127, "{}", r.describe());
        assert_eq!(r.get("/cliExitCode"), &json!(127), "{}", r.describe());
        assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
        // The caller's mistake, not cordon failing: a runtime error with a shell's code.
        assert_eq!(r.status(), "runtime_error", "{}", r.describe());
        assert_eq!(r.get("/exitCode"), &json!(127), "{}", r.describe());
    }
    // A script given with --file is in the working directory, not on PATH; one whose #! names
    // an interpreter the sandbox lacks says so (the kernel's bare ENOENT would read as
    // "not found" for a file that is there).
    let dir = shared_tempdir();
    let script = dir.path().join("s.sh");
    write_world_readable(&script, b"#!/opt/cordon-no-such/python3\nprint(1)\n");
    let file = format!("s.sh={}", script.display());
    let r = exec_json_run(who, &["--file", &file], &["s.sh"]);
    assert_eq!(r.code(), 127, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("not on PATH: run it as ./s.sh"), "{}", r.describe());
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let r = exec_json_run(who, &["--file", &file], &["./s.sh"]);
    assert_eq!((r.code(), r.status()), (127, "runtime_error"), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(
        msg.contains("cannot execute ./s.sh: its interpreter /opt/cordon-no-such/python3 (its #! line) is not in the sandbox"),
        "{}",
        r.describe()
    );
    // Windows line endings: the interpreter's name ends in a CR, which the message says.
    let crlf = dir.path().join("crlf.sh");
    write_world_readable(&crlf, b"#!/bin/sh\r\necho hi\r\n");
    std::fs::set_permissions(&crlf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let r = exec_json_run(who, &["--file", &format!("crlf.sh={}", crlf.display())], &["./crlf.sh"]);
    assert_eq!(r.code(), 127, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("carriage return") && msg.contains("dos2unix"), "{}", r.describe());
    let r = exec_json_run(who, &["--file", &file], &["/workspace/missing"]);
    assert_eq!(r.code(), 127, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("start empty but for the files given with --file") && !msg.contains("/lib*"), "{}", r.describe());
});

both!(fn command_not_executable_is_126(who) {
    let plain = exec_plain(who, &[] as &[&str], &["/etc/passwd"]);
    assert_eq!(plain.code, 126, "{}", plain.describe());
    let r = exec_json_run(who, &[] as &[&str], &["/etc/passwd"]);
    assert_eq!(r.code(), 126, "{}", r.describe());
    assert_eq!(r.get("/cliExitCode"), &json!(126), "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    // The message tells the causes apart: a file on a noexec mount (/etc), a file without
    // an execute bit (a script given with --file from a mode 644 host file), a directory.
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("mounted noexec") && msg.contains("and it is not executable (mode 644)"), "{}", r.describe());
    let dir = shared_tempdir();
    let script = dir.path().join("s.sh");
    write_world_readable(&script, b"#!/bin/sh\necho hi\n");
    let r = exec_json_run(who, &["--file", &format!("s.sh={}", script.display())], &["./s.sh"]);
    assert_eq!(r.code(), 126, "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("it is not executable (mode 644): run it through its interpreter (`sh ./s.sh`"), "{}", r.describe());
    let r = exec_json_run(who, &[] as &[&str], &["/usr"]);
    assert_eq!(r.code(), 126, "{}", r.describe());
    assert!(r.get("/message").as_str().unwrap_or("").ends_with("it is a directory"), "{}", r.describe());
});

both!(fn stdin_is_forwarded(who) {
    let plain = Cordon::exec(who, &[] as &[&str], &["cat"]).stdin(Input::Bytes(b"hello".to_vec())).run();
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert_eq!(plain.stdout_str(), "hello", "{}", plain.describe());

    // A larger input than a pipe buffer, through --json.
    let big: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let r = Cordon::exec(who, &["--json"], &["sh", "-c", "wc -c; echo end"])
        .stdin(Input::Bytes(big.clone()))
        .run_json();
    assert_eq!(r.expect_ok().split_whitespace().collect::<Vec<_>>(), ["300000", "end"], "{}", r.describe());
});

both!(fn stdin_from_file(who) {
    let dir = shared_tempdir();
    let file = dir.path().join("input.txt");
    write_world_readable(&file, b"from the file\n");
    let file_arg = file.to_str().unwrap();
    // cordon's own stdin carries something else: --stdin FILE must win.
    let r = Cordon::exec(who, &["--json", "--stdin", file_arg], &["cat"])
        .stdin(Input::Bytes(b"WRONG: cordon's own stdin\n".to_vec()))
        .run_json();
    assert_eq!(r.expect_ok(), "from the file\n", "{}", r.describe());

    let plain = exec_plain(who, &["--stdin", file_arg], &["cat"]);
    assert_eq!(plain.stdout_str(), "from the file\n", "{}", plain.describe());

    // A directory is no input: refused before the program runs (it read an empty stdin).
    let d = dir.path().to_str().unwrap();
    let plain = exec_plain(who, &["--stdin", d], &["sh", "-c", "echo RAN; wc -c"]);
    assert_eq!(plain.code, 125, "{}", plain.describe());
    assert!(!plain.stdout_str().contains("RAN"), "nothing may run:\n{}", plain.describe());
    assert!(plain.stderr_str().contains("Is a directory"), "{}", plain.describe());
});

/// Decodes a result's `output` or `error` given as base64.
fn unbase64(r: &JsonRun, field: &str) -> Vec<u8> {
    use base64::Engine;
    let text = r
        .get(field)
        .as_str()
        .unwrap_or_else(|| panic!("{field} must be a string:\n{}", r.describe()));
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("{field} must be base64 ({e}):\n{}", r.describe()))
}

both!(
    /// Every byte value through stdout and stderr, and binary stdin: under `--output-encoding
    /// base64` the result holds the exact bytes (cut at --output-limit when it is reached);
    /// the default UTF-8 text replaces the bytes that are not UTF-8 and says so.
    fn binary_output_round_trips_as_base64(who) {
        let all: Vec<u8> = (0..=255u8).collect();
        let reversed: Vec<u8> = all.iter().rev().copied().collect();
        let program = "import sys; b = bytes(range(256)); sys.stdout.buffer.write(b); sys.stderr.buffer.write(b[::-1])";
        let r = exec_json_run(who, &["--output-encoding", "base64"], &[PY, "-c", program]);
        r.expect_ok();
        assert_eq!(unbase64(&r, "/output"), all, "{}", r.describe());
        assert_eq!(unbase64(&r, "/error"), reversed, "{}", r.describe());
        assert_eq!(r.get("/outputEncoding"), &json!("base64"), "{}", r.describe());
        assert_eq!(r.get("/outputLossy"), &json!(false), "nothing was replaced:\n{}", r.describe());
        assert_eq!((r.get("/stdoutBytes"), r.get("/stderrBytes")), (&json!(256), &json!(256)), "{}", r.describe());

        // The default: text, with the loss said.
        let r = exec_json_run(who, &[] as &[&str], &[PY, "-c", program]);
        r.expect_ok();
        assert_eq!(r.get("/outputEncoding"), &json!("utf8"), "{}", r.describe());
        assert_eq!(r.get("/outputLossy"), &json!(true), "{}", r.describe());
        assert_eq!(r.output().as_bytes(), String::from_utf8_lossy(&all).as_bytes(), "{}", r.describe());

        // Binary stdin, through `cat`, comes back whole.
        let r = Cordon::exec(who, &["--json", "--output-encoding=base64"], &["cat"])
            .stdin(Input::Bytes(reversed.clone()))
            .run_json();
        r.expect_ok();
        assert_eq!(unbase64(&r, "/output"), reversed, "{}", r.describe());

        // Past the output limit: the bytes kept, exactly.
        let r = exec_json_run(who, &["--output-encoding", "base64", "--output-limit", "100"], &[PY, "-c", program]);
        assert_eq!(r.status(), "output_limit", "{}", r.describe());
        assert_eq!(unbase64(&r, "/output"), all[..100], "{}", r.describe());

        // Without --json there is no result to encode: refused, nothing run.
        let f = exec_plain(who, &["--output-encoding", "base64"], &["sh", "-c", "echo RAN"]);
        assert_eq!(f.code, 125, "{}", f.describe());
        assert!(f.stdout.is_empty() && f.stderr_str().contains("--json"), "{}", f.describe());
    }
);

fn assert_source(r: &JsonRun, key: &str, allowed: &[&str]) {
    let v = r.get(key);
    assert!(
        v.as_str().is_some_and(|s| allowed.contains(&s)),
        "{key} must be one of {allowed:?}, got {v}:\n{}",
        r.describe()
    );
}

fn assert_kind(r: &JsonRun, key: &str, ok: fn(&Value) -> bool, what: &str) {
    let v = r.json.pointer(key);
    assert!(
        v.is_some(),
        "{key} missing from the result object:\n{}",
        r.describe()
    );
    assert!(
        ok(v.unwrap()),
        "{key} must be {what}, got {}:\n{}",
        v.unwrap(),
        r.describe()
    );
}

both!(fn json_result_fields_present_and_typed(who) {
    let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "echo out; echo err >&2; exit 3"]);
    let is_num = |v: &Value| v.is_number();
    let is_num_or_null = |v: &Value| v.is_number() || v.is_null();
    let is_str = |v: &Value| v.is_string();
    let is_int_or_null = |v: &Value| v.is_i64() || v.is_u64() || v.is_null();
    let is_str_or_null = |v: &Value| v.is_string() || v.is_null();

    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    assert_eq!(r.output(), "out\n", "{}", r.describe());
    assert_eq!(r.error(), "err\n", "{}", r.describe());
    assert_eq!(r.get("/exitCode"), &json!(3), "{}", r.describe());
    assert_eq!(r.get("/signal"), &Value::Null, "{}", r.describe());
    assert_kind(&r, "/signalName", is_str_or_null, "a string or null");
    assert_kind(&r, "/executionTime", is_num, "a number (ms)");
    let wall = r.get("/executionTime").as_f64().unwrap();
    assert!(wall >= 0.0 && wall < r.elapsed().as_secs_f64() * 1000.0 + 1.0, "executionTime {wall} ms vs {:?}", r.elapsed());
    assert_kind(&r, "/cpuTime", is_num_or_null, "a number (ms) or null");
    assert_source(&r, "/cpuTimeSource", &["cgroup-v1", "cgroup-v2", "rusage", "inferred", "unavailable"]);
    assert_kind(&r, "/memoryUsed", is_int_or_null, "an integer (bytes) or null");
    assert_source(&r, "/memoryUsedSource", &["cgroup-v1", "cgroup-v2", "rusage", "inferred", "polled", "unavailable"]);
    assert_eq!(r.get("/oomKilled"), &json!(false), "{}", r.describe());
    assert_source(&r, "/oomKilledSource", &["cgroup-v1", "cgroup-v2", "rusage", "inferred", "polled", "unavailable"]);
    assert_eq!(r.get("/outputTruncated"), &json!(false), "{}", r.describe());
    assert_eq!(r.get("/stdoutBytes"), &json!(4), "{}", r.describe());
    assert_eq!(r.get("/stderrBytes"), &json!(4), "{}", r.describe());
    assert_eq!(r.get("/cliExitCode"), &json!(3), "{}", r.describe());
    if let Some(m) = r.json.get("message") {
        assert!(m.is_string(), "message must be a string when present: {m}");
    }

    // limits: each {value, enforcement, note?}
    r.backend(); // exactly cgroup-v2, cgroup-v1 or rlimit
    let enforcement = ["cgroup-v2", "cgroup-v1", "rlimit", "tmpfs", "supervisor", "affinity", "not-enforced"];
    for (key, default) in [
        ("wallTimeMs", Some(30_000.0)),
        ("memoryBytes", Some(512.0 * 1024.0 * 1024.0)),
        ("cpus", Some(1.0)),
        ("pids", Some(64.0)),
    ] {
        let limit = r.get(&format!("/limits/{key}"));
        assert!(limit.is_object(), "limits.{key} must be an object:\n{}", r.describe());
        assert_source(&r, &format!("/limits/{key}/enforcement"), &enforcement);
        if let Some(d) = default {
            assert_eq!(limit["value"].as_f64(), Some(d), "default limits.{key}.value:\n{}", r.describe());
            // Whole values are JSON integers (`536870912`, not `536870912.0`): decoders that
            // read them into integer types refuse a float.
            assert!(limit["value"].is_u64(), "limits.{key}.value must be an integer:\n{}", r.describe());
        }
        if let Some(note) = limit.get("note") {
            assert!(note.is_string(), "limits.{key}.note must be a string");
        }
    }
    assert_eq!(r.get("/limits/wallTimeMs/enforcement"), &json!("supervisor"), "{}", r.describe());
    // Without --output-dir nothing is collected: no `files` list, which would claim that the
    // program wrote none.
    assert!(r.json.get("files").is_none(), "`files` without --output-dir:\n{}", r.describe());

    // isolation
    let ns: Vec<&str> = r
        .get("/isolation/namespaces")
        .as_array()
        .unwrap_or_else(|| panic!("isolation.namespaces must be an array:\n{}", r.describe()))
        .iter()
        .map(|v| v.as_str().expect("namespace names are strings"))
        .collect();
    for want in [&["user"][..], &["pid"], &["mount", "mnt"], &["net", "network"], &["ipc"], &["uts"], &["cgroup"]] {
        assert!(want.iter().any(|w| ns.contains(w)), "isolation.namespaces lacks {want:?}: {ns:?}");
    }
    let host_uid = r.get("/isolation/hostUid").as_u64().expect("hostUid") as u32;
    assert!(who.is_expected_host_uid(host_uid), "hostUid {host_uid}:\n{}", r.describe());
    assert_eq!(r.get("/isolation/uid"), &json!(1000), "{}", r.describe());
    assert_eq!(r.get("/isolation/gid"), &json!(1000), "{}", r.describe());
    for key in ["landlock", "seccomp", "network", "rootfs", "capabilities", "hostViews", "coreDumps"] {
        assert_kind(&r, &format!("/isolation/{key}"), is_str, "a string");
    }
    assert_kind(&r, "/isolation/landlockAbi", is_int_or_null, "an integer or null");
    assert_eq!(r.get("/isolation/noNewPrivs"), &json!(true), "{}", r.describe());
    let rootfs = r.get("/isolation/rootfs").as_str().unwrap_or("");
    assert!(rootfs.starts_with("host"), "isolation.rootfs must name the host rootfs:\n{}", r.describe());
});

both!(fn unknown_option_is_a_cordon_error(who) {
    // A usage error is cordon's own failure: 125 (or clap's 2), never the program's code.
    let plain = exec_plain(who, &["--no-such-option"], &["true"]);
    assert!(plain.code == 125 || plain.code == 2, "{}", plain.describe());
    assert!(!plain.stderr.is_empty(), "a usage error must say what is wrong:\n{}", plain.describe());
});

// With --json, a command line cordon cannot parse still answers on stdout with the error
// object (a caller that reads JSON gets one), clap's message and tip in it; clap's text
// stays on stderr. A negative number is the option's value, refused by its parser, not
// taken for an option (clap's "use -- -1" tip would be wrong there).
both!(fn a_usage_error_with_json_is_a_json_error_object(who) {
    let r = Cordon::new(who).args(["exec", "--json", "--memory", "12X", "--", "true"]).run_json();
    assert_eq!(r.finished.code, 125, "{}", r.describe());
    assert_eq!((r.status(), r.get("/success")), ("sandbox_error", &json!(false)), "{}", r.describe());
    assert_eq!(r.get("/exitCode"), &json!(null), "no program ran:\n{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("invalid value '12X' for '--memory <SIZE>'") && !msg.contains("Usage:"), "{}", r.describe());
    assert!(String::from_utf8_lossy(&r.finished.stderr).contains("12X"), "{}", r.describe());
    let r = Cordon::new(who).args(["run", "--json", "--lang", "bash", "a.sh", "x"]).run_json();
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("unexpected argument 'x'") && msg.contains("; tip: the program's arguments go after `--`"), "{}", r.describe());
    let f = Cordon::new(who).args(["exec", "--json", "--timeout", "-1", "--", "true"]).run();
    let err = String::from_utf8_lossy(&f.stderr);
    assert!(f.code == 125 && err.contains("invalid duration `-1`") && !err.contains("-- -1"), "{}", f.describe());
    // Without --json (or with it only in the command's arguments): no JSON on stdout.
    let f = Cordon::new(who).args(["exec", "--memory", "12X", "--", "echo", "--json"]).run();
    assert!(f.code == 125 && f.stdout.is_empty(), "{}", f.describe());
});

both!(fn the_command_needs_no_double_dash(who) {
    // As with env, timeout or bwrap: the first argument that is not one of cordon's options
    // starts the command, and what follows is the command's, cordon's option names included.
    let f = Cordon::new(who)
        .args(["exec", "--timeout", "20s", "sh", "-c", "echo \"$0|$1|$2\"", "--json", "--timeout", "--memory=1G"])
        .run();
    assert_eq!(f.code, 0, "{}", f.describe());
    assert_eq!(String::from_utf8_lossy(&f.stdout), "--json|--timeout|--memory=1G\n", "{}", f.describe());
    // cordon says so for its limits: the author may have meant them for cordon (a limit
    // silently not set); not for options programs have too (--json, -e).
    let err = String::from_utf8_lossy(&f.stderr);
    assert!(err.contains("--timeout --memory=1G come after the command \"sh\""), "{}", f.describe());
    let f = Cordon::new(who).args(["exec", "sh", "-c", "echo $0", "-e"]).run();
    assert_eq!(String::from_utf8_lossy(&f.stdout), "-e\n", "{}", f.describe());
    assert!(!String::from_utf8_lossy(&f.stderr).contains("warning"), "{}", f.describe());
    let f = Cordon::new(who).args(["exec", "--", "sh", "-c", "echo $0", "--json"]).run();
    assert_eq!(String::from_utf8_lossy(&f.stdout), "--json\n", "{}", f.describe());
    assert!(!String::from_utf8_lossy(&f.stderr).contains("warning"), "`--` says where the command starts:\n{}", f.describe());
    // A mistyped option before the command is still a usage error, not a command.
    let f = Cordon::new(who).args(["exec", "--jsn", "true"]).run();
    assert_eq!(f.code, 125, "{}", f.describe());
    assert!(String::from_utf8_lossy(&f.stderr).contains("--json"), "clap's suggestion:\n{}", f.describe());
});

both!(fn run_says_where_the_programs_arguments_go(who) {
    let f = Cordon::new(who).args(["run", "--lang", "bash", "-c", "echo $1", "x"]).run();
    assert_eq!(f.code, 125, "{}", f.describe());
    let err = String::from_utf8_lossy(&f.stderr);
    assert!(err.contains("with -c, the program's arguments go after `--`"), "{}", f.describe());
    let f = Cordon::new(who).args(["run", "--lang", "bash", "a.sh", "x", "y"]).run();
    assert_eq!(f.code, 125, "{}", f.describe());
    let err = String::from_utf8_lossy(&f.stderr);
    assert!(err.contains("unexpected argument 'x'") && err.contains("go after `--`"), "{}", f.describe());
    let f = Cordon::new(who).args(["run", "--lang", "bash", "-c", "echo $1", "--", "x"]).run();
    assert_eq!(f.code, 0, "{}", f.describe());
    assert_eq!(String::from_utf8_lossy(&f.stdout), "x\n", "{}", f.describe());
    // Without --lang, a FILE's extension names the language; -c alone cannot.
    let dir = shared_tempdir();
    let script = dir.path().join("args.sh");
    write_world_readable(&script, b"echo \"from-file $1\"\n");
    let f = Cordon::new(who).args(["run", script.to_str().unwrap(), "--", "y"]).run();
    assert_eq!(f.code, 0, "{}", f.describe());
    assert_eq!(String::from_utf8_lossy(&f.stdout), "from-file y\n", "{}", f.describe());
    let f = Cordon::new(who).args(["run", "-c", "echo hi"]).run();
    assert_eq!(f.code, 125, "{}", f.describe());
    assert!(String::from_utf8_lossy(&f.stderr).contains("give the language with --lang (bash, go, node, python, rust"), "{}", f.describe());
});

/// An empty directory the caller of cordon owns (it writes `--output-dir` as itself).
fn caller_owned_dir(who: Who, parent: &std::path::Path, name: &str) -> std::path::PathBuf {
    let d = parent.join(name);
    std::fs::create_dir(&d).expect("mkdir");
    std::os::unix::fs::chown(&d, Some(who.caller_uid()), Some(who.caller_gid())).expect("chown");
    d
}

both!(fn files_go_in_with_file_and_come_back_with_output_dir(who) {
    use std::os::unix::fs::MetadataExt;
    let dir = shared_tempdir();
    let input = dir.path().join("in.txt");
    write_world_readable(&input, b"from the host\n");
    let out = caller_owned_dir(who, dir.path(), "out");
    let script = "cat data/in.txt; mkdir -p res empty/sub; tr a-z A-Z < data/in.txt > res/upper.txt; echo x > top.txt";
    let file_arg = format!("data/in.txt={}", input.display());
    let r = exec_json_run(who, &["--file", &file_arg, "--output-dir", out.to_str().unwrap()], &["sh", "-c", script]);
    assert_eq!(r.expect_ok(), "from the host\n", "the --file must be in /workspace:\n{}", r.describe());
    // What the program wrote is listed and copied out; the input file it was given is not.
    assert_eq!(
        r.files(),
        [("res/upper.txt".to_string(), 14), ("top.txt".to_string(), 2)],
        "{}",
        r.describe()
    );
    assert_eq!(std::fs::read_to_string(out.join("res/upper.txt")).unwrap(), "FROM THE HOST\n");
    assert_eq!(std::fs::read_to_string(out.join("top.txt")).unwrap(), "x\n");
    assert!(!out.join("data").exists(), "the input file must not be copied back:\n{}", r.describe());
    // An empty directory is listed and made; the one made for the input file is not.
    assert_eq!(r.get("/directories"), &json!(["empty/sub"]), "{}", r.describe());
    assert!(out.join("empty/sub").is_dir(), "{}", r.describe());
    let meta = std::fs::metadata(out.join("res/upper.txt")).unwrap();
    assert_eq!(meta.uid(), who.caller_uid(), "--output-dir files belong to the caller");

    // Without --json too: output passes through, the exit code is the program's.
    let out2 = caller_owned_dir(who, dir.path(), "out2");
    let plain = exec_plain(who, &["--file", &file_arg, "--output-dir", out2.to_str().unwrap()], &["sh", "-c", "cp data/in.txt copy.txt; exit 3"]);
    assert_eq!(plain.code, 3, "{}", plain.describe());
    assert_eq!(std::fs::read_to_string(out2.join("copy.txt")).unwrap(), "from the host\n", "{}", plain.describe());

    // What is not copied (a symlink never is) is said on stderr in text mode too.
    let out3 = caller_owned_dir(who, dir.path(), "out3");
    let plain = exec_plain(who, &["--output-dir", out3.to_str().unwrap()], &["sh", "-c", "ln -s /etc/passwd link; echo x > ok.txt"]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert!(
        plain.stderr_str().contains("1 file(s) the program wrote were not copied to --output-dir (first: link:"),
        "{}",
        plain.describe()
    );
    assert!(out3.join("ok.txt").is_file() && !out3.join("link").exists(), "{}", plain.describe());

    // The name is the program's choice: cordon's line quotes it with its control characters
    // escaped, so it can neither rewrite that line nor send the terminal escape sequences.
    let out4 = caller_owned_dir(who, dir.path(), "out4");
    let plain = exec_plain(
        who,
        &["--output-dir", out4.to_str().unwrap()],
        &["sh", "-c", r#"ln -s /etc/passwd "$(printf '\r\033]52;c;aGk=\007x')""#],
    );
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let err = plain.stderr_str();
    assert!(
        !err.contains('\u{1b}') && !err.contains('\r') && err.contains("(first: \\r\\u{1b}]52;c;aGk=\\u{7}x:"),
        "{}",
        plain.describe()
    );
    // The same inside a delivery error: a name with a newline, under which the output
    // directory holds a directory, cannot forge a line of cordon's of its own.
    let out5 = caller_owned_dir(who, dir.path(), "out5");
    let forged = "x\ncordon: ok: forged";
    std::fs::create_dir(out5.join(forged)).unwrap();
    let plain = exec_plain(
        who,
        &["--output-dir", out5.to_str().unwrap()],
        &["sh", "-c", r#"printf y > "$(printf 'x\ncordon: ok: forged')""#],
    );
    let err = plain.stderr_str();
    assert!(
        plain.code == 125 && err.contains("x\\ncordon: ok: forged") && !err.lines().any(|l| l.starts_with("cordon: ok")),
        "{}",
        plain.describe()
    );
});

both!(fn output_dir_problems_are_reported(who) {
    let dir = shared_tempdir();
    // Not a directory: refused before anything runs.
    let blocked = dir.path().join("not-a-dir");
    write_world_readable(&blocked, b"");
    let plain = exec_plain(who, &["--output-dir", blocked.to_str().unwrap()], &["sh", "-c", "echo RAN"]);
    assert_eq!(plain.code, 125, "{}", plain.describe());
    assert!(!plain.stdout_str().contains("RAN"), "nothing may run:\n{}", plain.describe());
    assert!(plain.stderr_str().contains("not a directory"), "{}", plain.describe());
    // A symlink as the directory: refused too (it could point anywhere).
    let out = caller_owned_dir(who, dir.path(), "real");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    let plain = exec_plain(who, &["--output-dir", link.to_str().unwrap()], &["sh", "-c", "echo RAN"]);
    assert_eq!(plain.code, 125, "{}", plain.describe());
    assert!(plain.stderr_str().contains("symlink"), "{}", plain.describe());
    // A directory the caller cannot write (its own, mode 0555; root writes any): refused
    // before the program runs, not after it ran for nothing.
    if who == Who::User {
        let ro = caller_owned_dir(who, dir.path(), "ro");
        std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
        let plain = exec_plain(who, &["--output-dir", ro.to_str().unwrap()], &["sh", "-c", "echo RAN"]);
        assert_eq!(plain.code, 125, "{}", plain.describe());
        assert!(!plain.stdout_str().contains("RAN"), "nothing may run:\n{}", plain.describe());
        assert!(
            plain.stderr_str().contains("cannot write into it") && plain.stderr_str().contains("mode 555"),
            "{}",
            plain.describe()
        );
        // A new directory under it: the one above is what the caller may not write.
        let below = ro.join("new");
        let plain = exec_plain(who, &["--output-dir", below.to_str().unwrap()], &["sh", "-c", "echo RAN"]);
        assert_eq!(plain.code, 125, "{}", plain.describe());
        assert!(plain.stderr_str().contains("may not write in the directory above it"), "{}", plain.describe());
    }

    // A FIFO where the program's file goes: never opened (that would hang cordon), reported
    // after the run; a successful run then exits 125, a failed one keeps its code.
    nix_mkfifo(&out.join("f.txt"));
    let r = exec_json_run(who, &["--output-dir", out.to_str().unwrap()], &["sh", "-c", "echo x > f.txt; echo yy > ok.txt"]);
    assert_eq!(r.code(), 125, "a run whose files could not be delivered must not exit 0:\n{}", r.describe());
    // Nor read as a success: an agent checking `success` would take the files for delivered.
    assert_eq!(r.get("/success").as_bool(), Some(false), "{}", r.describe());
    assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
    assert_eq!(r.get("/exitCode").as_i64(), Some(0), "the program's own code stays:\n{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("--output-dir") && msg.contains("f.txt"), "the message must say what failed:\n{}", r.describe());
    // `files` lists what is in the directory; the file not written is omitted, with why.
    assert_eq!(r.files(), [("ok.txt".to_string(), 3)], "{}", r.describe());
    assert_eq!(std::fs::read(out.join("ok.txt")).unwrap(), b"yy\n");
    let omitted = r.get("/filesOmitted");
    assert!(
        omitted[0]["path"] == "f.txt"
            && omitted[0]["reason"].as_str().unwrap_or("").starts_with("not written to --output-dir: refusing to write into"),
        "{}",
        r.describe()
    );
    let plain = exec_plain(who, &["--output-dir", out.to_str().unwrap()], &["sh", "-c", "echo x > f.txt; exit 4"]);
    assert_eq!(plain.code, 4, "the program's own failure code stands:\n{}", plain.describe());
});

fn nix_mkfifo(path: &std::path::Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(st.success());
}

both!(fn ro_bind_shows_a_host_directory_read_only(who) {
    let dir = shared_tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    write_world_readable(&data.join("table.csv"), b"a,b\n1,2\n");
    let bind = format!("{}:/data", data.display());
    let script = "cat /data/table.csv; \
        if echo x > /data/new 2>/dev/null; then echo WROTE-NEW; fi; \
        if echo x >> /data/table.csv 2>/dev/null; then echo WROTE-OLD; fi; \
        grep ' /data ' /proc/self/mountinfo";
    let r = exec_json_run(who, &["--ro-bind", &bind], &["sh", "-c", script]);
    let out = r.expect_ok();
    assert!(out.starts_with("a,b\n1,2\n"), "the host directory's files must be readable:\n{}", r.describe());
    assert!(!out.contains("WROTE"), "/data must be read-only:\n{}", r.describe());
    let mountinfo = out.lines().last().unwrap_or("");
    for flag in ["ro", "nosuid", "nodev"] {
        assert!(
            mountinfo.split_whitespace().nth(5).unwrap_or("").split(',').any(|f| f == flag),
            "/data must be mounted {flag}:\n{}",
            r.describe()
        );
    }
    let canonical = std::fs::canonicalize(&data).unwrap();
    assert_eq!(
        r.get("/isolation/binds"),
        &json!([format!("/data <- {} (read-only)", canonical.display())]),
        "the result must say what was shown:\n{}",
        r.describe()
    );
    assert!(!data.join("new").exists(), "nothing may appear in the host directory");
    assert_eq!(std::fs::read(data.join("table.csv")).unwrap(), b"a,b\n1,2\n");
});

both!(fn bad_file_and_bind_arguments_are_refused_before_anything_runs(who) {
    let dir = shared_tempdir();
    let file = dir.path().join("f.txt");
    write_world_readable(&file, b"x");
    let d = dir.path().display().to_string();
    let f = file.display().to_string();
    let fifo = dir.path().join("fifo");
    nix_mkfifo(&fifo);
    for (opts, says) in [
        (vec!["--ro-bind".to_string(), format!("{d}:/usr")], "kept for the sandbox's own root"),
        (vec!["--ro-bind".to_string(), format!("{d}:/workspace")], "kept for the sandbox's own root"),
        (vec!["--ro-bind".to_string(), format!("{d}:/a/b")], "one new top-level directory"),
        (vec!["--ro-bind".to_string(), format!("{d}:/da\nta")], "letters, digits"),
        (vec!["--ro-bind".to_string(), format!("{d}:/data"), "--ro-bind".to_string(), format!("{d}:/data")], "used twice"),
        (vec!["--ro-bind".to_string(), format!("{f}:/data")], "not a directory"),
        (vec!["--ro-bind".to_string(), format!("{d}/missing:/data")], "cannot resolve"),
        (vec!["--ro-bind".to_string(), d.clone()], "SRC:DST"),
        (vec!["--file".to_string(), format!("../x={f}")], "`..`"),
        (vec!["--file".to_string(), format!("/etc/x={f}")], "relative"),
        (vec!["--file".to_string(), format!("x={d}/missing")], "cannot read"),
        (vec!["--file".to_string(), format!("x={}", fifo.display())], "not a regular file"),
        (vec!["--file".to_string(), "x=/dev/zero".to_string()], "not a regular file"),
        (vec!["--file".to_string(), format!("x={f}"), "--file".to_string(), format!("x={f}")], "twice"),
        (vec!["--file".to_string(), format!("a={f}"), "--file".to_string(), format!("a/b={f}")], "needs a as a directory"),
        (vec!["--ro-bind".to_string(), "/proc/sys:/data".to_string()], "proc filesystem"),
        (vec!["--ro-bind".to_string(), "/:/data".to_string()], "mount point below it"),
        (vec!["--ro-bind".to_string(), format!("{d}:/data"), "--allow-degraded".to_string(), "overlay".to_string()], "--allow-degraded overlay"),
    ] {
        let plain = exec_plain(who, &opts, &["sh", "-c", "echo RAN"]);
        assert_eq!(plain.code, 125, "{opts:?}:\n{}", plain.describe());
        assert!(!plain.stdout_str().contains("RAN"), "{opts:?}: nothing may run:\n{}", plain.describe());
        assert!(plain.stderr_str().contains(says), "{opts:?}: the error must say {says:?}:\n{}", plain.describe());
    }
});

/// Sorted names of the regular files under `dir` (relative paths).
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

both!(
    /// --collect-files 3 with five files written: three come back (listed and in
    /// --output-dir), the other two are listed in filesOmitted with the cap and what raises
    /// it, and the message says the output is incomplete (the run itself is ok).
    fn collect_files_caps_the_files_collected(who) {
        let dir = shared_tempdir();
        let out = caller_owned_dir(who, dir.path(), "out");
        let r = exec_json_run(
            who,
            &["--output-dir", out.to_str().unwrap(), "--collect-files", "3"],
            &["sh", "-c", "for i in 1 2 3 4 5; do echo $i > f$i.txt; done"],
        );
        r.expect_ok();
        let names: Vec<String> = r.files().into_iter().map(|(p, _)| p).collect();
        assert_eq!(names, ["f1.txt", "f2.txt", "f3.txt"], "{}", r.describe());
        assert_eq!(files_under(&out), names, "--output-dir holds what is listed:\n{}", r.describe());
        let reason = "over the 3-file cap (--collect-files / config.collectFiles raise it)";
        assert_eq!(
            r.omitted(),
            [("f4.txt".to_string(), reason.to_string()), ("f5.txt".to_string(), reason.to_string())],
            "{}",
            r.describe()
        );
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(
            msg.contains("not every file in /workspace was collected: f4.txt") && msg.contains("--collect-files"),
            "{}",
            r.describe()
        );
        // Out of range: a usage error naming the flag, the value and the range; nothing runs.
        for (flag, value, range) in [("--collect-files", "0", "1 to 100000"), ("--collect-size", "2G", "1 byte to 1G")] {
            let plain = exec_plain(who, &["--output-dir", out.to_str().unwrap(), flag, value], &["sh", "-c", "echo RAN"]);
            assert_eq!(plain.code, 125, "{flag} {value}:\n{}", plain.describe());
            assert!(!plain.stdout_str().contains("RAN"), "{flag} {value}: nothing may run:\n{}", plain.describe());
            let err = plain.stderr_str();
            assert!(err.contains(flag) && err.contains(value) && err.contains(range), "{flag} {value}:\n{}", plain.describe());
        }
    }
);

both!(
    /// --collect-size 1k: a file that fits comes back whole; the next, which would pass the
    /// total, is left out (not written to --output-dir), its reason naming the cap and the
    /// flag.
    fn collect_size_cuts_what_passes_the_total(who) {
        let dir = shared_tempdir();
        let out = caller_owned_dir(who, dir.path(), "out");
        let r = exec_json_run(
            who,
            &["--output-dir", out.to_str().unwrap(), "--collect-size", "1k"],
            &["sh", "-c", "head -c 600 /dev/zero > a.bin; head -c 600 /dev/zero > b.bin"],
        );
        r.expect_ok();
        assert_eq!(r.files(), [("a.bin".to_string(), 600)], "{}", r.describe());
        assert_eq!(std::fs::metadata(out.join("a.bin")).map(|m| m.len()).ok(), Some(600), "{}", r.describe());
        assert!(!out.join("b.bin").exists(), "a file over the cap must not be written:\n{}", r.describe());
        assert_eq!(
            r.omitted(),
            [("b.bin".to_string(), "over the 1 KiB total-size cap (--collect-size / config.collectSize raise it)".to_string())],
            "{}",
            r.describe()
        );
        assert!(r.get("/message").as_str().unwrap_or("").contains("--collect-size"), "{}", r.describe());
    }
);

both!(
    /// 1500 files: the default cap collects 1000 and leaves 500 out; --collect-files 1500
    /// collects them all.
    fn a_raised_file_cap_collects_more_than_1000_files(who) {
        let script = "i=0; while [ $i -lt 1500 ]; do echo $i > f$i; i=$((i+1)); done";
        let dir = shared_tempdir();
        let out = caller_owned_dir(who, dir.path(), "default");
        let r = exec_json_run(who, &["--output-dir", out.to_str().unwrap()], &["sh", "-c", script]);
        r.expect_ok();
        assert_eq!(r.files().len(), 1000, "{}", r.describe());
        let listed = r.omitted().len() as u64;
        let unlisted = r.get("/filesOmittedUnlisted").as_u64().unwrap_or(0);
        assert_eq!(listed + unlisted, 500, "{}", r.describe());
        assert!(
            r.omitted().iter().all(|(_, why)| why == "over the 1000-file cap (--collect-files / config.collectFiles raise it)"),
            "{}",
            r.describe()
        );

        let out = caller_owned_dir(who, dir.path(), "raised");
        let r = exec_json_run(who, &["--output-dir", out.to_str().unwrap(), "--collect-files", "1500"], &["sh", "-c", script]);
        r.expect_ok();
        assert_eq!(r.files().len(), 1500, "{}", r.describe());
        assert!(r.omitted().is_empty(), "{}", r.describe());
        assert!(r.get("/message").is_null(), "{}", r.describe());
        assert_eq!(files_under(&out).len(), 1500, "{}", r.describe());
    }
);

both!(
    /// `--json --stream`: the program's output arrives on cordon's stdout as JSON lines while
    /// the program runs (it blocks on its stdin after its first lines, which the test sees
    /// before letting it go on), a character split between two writes arrives whole, and the
    /// result, one line, is last and holds the same output.
    fn stream_prints_output_as_it_arrives(who) {
        let script = "echo first; echo err >&2; read x; printf '\\303'; sleep 0.2; printf '\\251 %s\\n' \"$x\"";
        let mut held = Cordon::exec(who, &["--json", "--stream"], &["sh", "-c", script]).hold();
        held.wait_for_line(r#"{"stdout":"first\n"}"#);
        held.wait_for_line(r#"{"stderr":"err\n"}"#);
        let f = held.finish();
        assert_eq!(f.code, 0, "{}", f.describe());
        let lines = f.json_lines();
        let (result, events) = lines.split_last().unwrap_or_else(|| panic!("no lines:\n{}", f.describe()));
        assert_eq!(result["status"], json!("ok"), "{}", f.describe());
        let mut streamed = [String::new(), String::new()];
        for e in events {
            let o = e.as_object().unwrap_or_else(|| panic!("{e}"));
            assert_eq!(o.len(), 1, "one key a line: {e}");
            let (k, v) = o.iter().next().unwrap();
            let i = ["stdout", "stderr"].iter().position(|s| s == k).unwrap_or_else(|| panic!("{e}"));
            let piece = v.as_str().unwrap_or_else(|| panic!("{e}"));
            assert!(!piece.contains('\u{fffd}'), "no character is cut: {e}\n{}", f.describe());
            streamed[i].push_str(piece);
        }
        assert_eq!(streamed[0], "first\né \n", "{}", f.describe());
        assert_eq!((result["output"].as_str(), result["error"].as_str()), (Some("first\né \n"), Some("err\n")), "{}", f.describe());
        assert_eq!(result["outputLossy"], json!(false), "{}", f.describe());

        // base64, and the output limit: what is streamed is what the result keeps.
        let f = Cordon::exec(who, &["--json", "--stream", "--output-encoding", "base64", "--output-limit", "5"], &["sh", "-c", "echo 1234567890"]).run();
        let lines = f.json_lines();
        let (result, events) = lines.split_last().expect("lines");
        assert_eq!(result["status"], json!("output_limit"), "{}", f.describe());
        let b64 = base64::engine::general_purpose::STANDARD;
        let streamed: Vec<u8> = events.iter().flat_map(|e| base64::Engine::decode(&b64, e["stdout"].as_str().expect("stdout pieces")).expect("base64")).collect();
        assert_eq!(streamed, b"12345", "{}", f.describe());
        assert_eq!(result["output"], json!("MTIzNDU="), "{}", f.describe());

        // A character the output limit cuts is left out of the pieces, as of `output`.
        let f = Cordon::exec(who, &["--json", "--stream", "--output-limit", "3"], &["sh", "-c", "printf 'ab\\303\\251cd'"]).run();
        let lines = f.json_lines();
        let (result, events) = lines.split_last().expect("lines");
        let streamed: String = events.iter().map(|e| e["stdout"].as_str().expect("stdout pieces")).collect();
        assert_eq!((streamed.as_str(), &result["output"]), ("ab", &json!("ab")), "{}", f.describe());

        // Without --json there is no JSON to stream into: refused, nothing run.
        let f = Cordon::exec(who, &["--stream"], &["sh", "-c", "echo RAN"]).run();
        assert_eq!(f.code, 125, "{}", f.describe());
        assert!(!f.stdout_str().contains("RAN") && f.stderr_str().contains("--stream prints the program's output as JSON lines"), "{}", f.describe());
    }
);

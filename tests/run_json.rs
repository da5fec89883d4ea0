//! `cordon run --request`, `cordon run --requests --jobs N` and `cordon profiles`, as root and
//! as the unprivileged user: a JSON round trip, each bad request (exit 125, a sandbox_error
//! object naming the problem, nothing run), batch order, and the language list.

#[macro_use]
mod common;

use base64::Engine;
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Helpers (the user variant's HOME and XDG directories are set by tests/common).

/// `cordon SUBCOMMAND …` as `who`. `setpriv` keeps root's environment (HOME=/root), so the
/// unprivileged user gets its own HOME and XDG directories.
fn cordon(who: Who, subcommand: &str) -> Cordon {
    Cordon::new(who).arg(subcommand)
}

/// A directory `who` can write (an `outputDir` parent).
fn writable_dir(who: Who) -> tempfile::TempDir {
    let dir = shared_tempdir();
    std::os::unix::fs::chown(dir.path(), Some(who.caller_uid()), Some(who.caller_gid()))
        .expect("chown the output dir to the caller");
    dir
}

/// `cordon run --request -` with `request` on stdin.
fn request(who: Who, request: &[u8]) -> JsonRun {
    cordon(who, "run")
        .arg("--request")
        .arg("-")
        .stdin(Input::Bytes(request.to_vec()))
        .run_json()
}

// ---------------------------------------------------------------------------------------------
// Round trip.

const ROUND_TRIP_MAIN: &str = r#"import os, subprocess, sys
from helper import shout
print(shout("helper"))
print(sys.argv[1:])
print(repr(sys.stdin.read()))
print(os.environ["GREETING"])
print(list(open("data.bin", "rb").read()))
print(subprocess.run(["./tool.sh", "x"], capture_output=True, text=True).stdout, end="")
os.makedirs("results", exist_ok=True)
open("results/answer.txt", "w").write("42\n")
"#;

both!(
    /// A request with several files (text, base64, an executable), an entry point, args,
    /// stdin, env, config limits and an outputDir: the program sees all of it, the result
    /// reports the limits in force, lists the file it wrote (not the inputs), and the file
    /// arrives in outputDir.
    fn python_request_round_trip(who) {
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        let req = json!({
            "language": "python",
            "files": {
                "main.py": ROUND_TRIP_MAIN,
                "helper.py": "def shout(s):\n    return s.upper()\n",
                "data.bin": {
                    "content": base64::engine::general_purpose::STANDARD.encode([0u8, 255, 1, 254]),
                    "encoding": "base64"
                },
                "tool.sh": {
                    "content": "#!/bin/sh\necho tool-ran \"$1\"\n",
                    "encoding": "utf8",
                    "executable": true
                }
            },
            "entryPoint": "main.py",
            "args": ["a b", "c"],
            "stdin": "in-line\n",
            "env": {"GREETING": "hej"},
            "config": {
                "timeout": 20000,
                "memoryLimit": 256,
                "cpuLimit": 1,
                "pids": 32,
                "network": "none",
                "outputLimit": 100000
            },
            "outputDir": out,
        });
        let r = request(who, req.to_string().as_bytes());
        assert_eq!(
            r.expect_ok(),
            "HELPER\n['a b', 'c']\n'in-line\\n'\nhej\n[0, 255, 1, 254]\ntool-ran x\n",
            "{}",
            r.describe()
        );
        assert_eq!(r.get("/language"), &json!("python"), "{}", r.describe());
        assert_eq!(r.get("/success"), &json!(true), "{}", r.describe());
        assert!(r.get("/executionTime").is_number(), "{}", r.describe());
        for (pointer, want) in [
            ("/limits/wallTimeMs/value", 20000.0),
            ("/limits/memoryBytes/value", 256.0 * 1024.0 * 1024.0),
            ("/limits/pids/value", 32.0),
            ("/limits/outputBytes/value", 100000.0),
            ("/limits/cpus/value", 1.0),
        ] {
            assert_eq!(
                r.get(pointer).as_f64(),
                Some(want),
                "config must set {pointer}:\n{}",
                r.describe()
            );
        }
        assert_eq!(
            r.files(),
            vec![("results/answer.txt".to_string(), 3)],
            "files lists what the program wrote, not its inputs:\n{}",
            r.describe()
        );
        assert_eq!(
            std::fs::read(out.join("results/answer.txt")).ok(),
            Some(b"42\n".to_vec()),
            "outputDir must receive the file:\n{}",
            r.describe()
        );

        // The shortest request, from a file.
        let dir = shared_tempdir();
        let file = dir.path().join("req.json");
        write_world_readable(&file, br#"{"language": "python", "code": "print(6 * 7)"}"#);
        let r = cordon(who, "run").arg("--request").arg(&file).run_json();
        assert_eq!(r.expect_ok(), "42\n", "{}", r.describe());
        assert_eq!(r.get("/files"), &json!([]), "{}", r.describe());
    }
);

/// Decodes a result's `output` or `error` given as base64.
fn unbase64(v: &Value, field: &str) -> Vec<u8> {
    let text = v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} must be a string: {v}"));
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("{field} must be base64 ({e}): {v}"))
}

both!(
    /// Binary stdin in a request (`{"content", "encoding": "base64"}`, as `files` takes it)
    /// reaches the program byte for byte, and `"outputEncoding": "base64"` brings every byte
    /// value back through stdout and stderr; `--output-encoding` is the default of a batch's
    /// requests (a request's own field wins) and of `cordon run --json`.
    fn binary_stdin_and_output_round_trip(who) {
        let all: Vec<u8> = (0..=255u8).collect();
        let reversed: Vec<u8> = all.iter().rev().copied().collect();
        let echo = "import sys\ndata = sys.stdin.buffer.read()\nsys.stdout.buffer.write(data)\nsys.stderr.buffer.write(data[::-1])\n";
        let req = json!({
            "language": "python",
            "code": echo,
            "stdin": {"content": base64::engine::general_purpose::STANDARD.encode(&all), "encoding": "base64"},
            "outputEncoding": "base64",
        });
        let r = request(who, req.to_string().as_bytes());
        r.expect_ok();
        assert_eq!(unbase64(&r.json, "output"), all, "{}", r.describe());
        assert_eq!(unbase64(&r.json, "error"), reversed, "{}", r.describe());
        assert_eq!(r.get("/outputEncoding"), &json!("base64"), "{}", r.describe());
        assert_eq!(r.get("/outputLossy"), &json!(false), "{}", r.describe());
        assert_eq!(r.get("/stdoutBytes"), &json!(256), "{}", r.describe());

        // A batch: the flag for the request that says nothing, the request's own otherwise.
        let mut utf8 = req.clone();
        utf8["outputEncoding"] = json!("utf8");
        let mut unsaid = req.clone();
        unsaid.as_object_mut().unwrap().remove("outputEncoding");
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        write_world_readable(&file, format!("{unsaid}\n{utf8}\n").as_bytes());
        let f = cordon(who, "run")
            .args(["--output-encoding", "base64", "--requests"])
            .arg(&file)
            .deadline(Duration::from_secs(60))
            .run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let got = f.json_lines();
        assert_eq!(got.len(), 2, "{}", f.describe());
        assert_eq!(unbase64(&got[0], "output"), all, "{}", f.describe());
        assert_eq!(got[1]["outputEncoding"], json!("utf8"), "{}", f.describe());
        assert_eq!(got[1]["outputLossy"], json!(true), "{}", f.describe());
        assert_eq!(got[1]["output"].as_str().map(str::as_bytes), Some(String::from_utf8_lossy(&all).as_bytes()), "{}", f.describe());

        // Code on the command line, with --json.
        let input = dir.path().join("in.bin");
        write_world_readable(&input, &all);
        let r = cordon(who, "run")
            .args(["--lang", "python", "--json", "--output-encoding", "base64", "--stdin"])
            .arg(&input)
            .args(["-c", echo])
            .run_json();
        r.expect_ok();
        assert_eq!(unbase64(&r.json, "error"), reversed, "{}", r.describe());
    }
);

both!(
    /// At the output limit the cut may fall inside a multi-byte character: the text leaves
    /// that character out whole (no U+FFFD, `outputLossy` false: the program wrote valid
    /// UTF-8), on stdout and on stderr, while base64 holds the exact bytes kept, its first
    /// bytes included, and `stdoutBytes`/`stderrBytes` what the program wrote.
    fn a_character_split_by_the_output_limit_is_left_out_whole(who) {
        let limit = 1000;
        for (stream, code, ch) in [
            ("output", "print('a' + '\\u00e9' * 600)", "\u{e9}"),
            ("error", "import sys; sys.stderr.write('\\u20ac' * 400)", "\u{20ac}"),
        ] {
            let run = |encoding: &str| {
                cordon(who, "run")
                    .args(["--lang", "python", "--json", "--no-history", "--output-limit", "1000", "--output-encoding", encoding])
                    .args(["-c", code])
                    .run_json()
            };
            let r = run("utf8");
            assert_eq!(r.status(), "output_limit", "{stream}:\n{}", r.describe());
            let text = r.get(&format!("/{stream}")).as_str().unwrap_or_default();
            assert!(!text.contains('\u{fffd}'), "{stream}: the split character must be left out, not replaced:\n{}", r.describe());
            assert_eq!(r.get("/outputLossy"), &json!(false), "{stream}: the program wrote valid UTF-8:\n{}", r.describe());
            // 1000 bytes kept: the last character's 1 byte (of 2, or of 3) is left out.
            assert_eq!(text.len(), limit - 1, "{stream}:\n{}", r.describe());
            assert!(text.ends_with(ch), "{stream}:\n{}", r.describe());
            let written = if stream == "output" { "/stdoutBytes" } else { "/stderrBytes" };
            assert!(r.get(written).as_u64().is_some_and(|n| n > limit as u64), "{stream}: what was written, kept or not:\n{}", r.describe());

            let r = run("base64");
            assert_eq!(r.status(), "output_limit", "{stream}:\n{}", r.describe());
            let bytes = unbase64(&r.json, stream);
            assert_eq!(bytes.len(), limit, "{stream}: the exact bytes kept:\n{}", r.describe());
            assert_eq!(&bytes[..limit - 1], text.as_bytes(), "{stream}:\n{}", r.describe());
            assert_eq!(bytes[limit - 1], ch.as_bytes()[0], "{stream}: the split character's first byte:\n{}", r.describe());
        }
    }
);

// ---------------------------------------------------------------------------------------------
// Bad requests.

/// Asserts a bad request was refused before anything ran.
fn assert_refused(r: &JsonRun, what: &str, message_has: &[&str], out: &Path) {
    assert_eq!(r.code(), 125, "{what}: exit 125:\n{}", r.describe());
    assert_eq!(r.status(), "sandbox_error", "{what}:\n{}", r.describe());
    assert_eq!(
        r.get("/success"),
        &json!(false),
        "{what}:\n{}",
        r.describe()
    );
    let msg = r.get("/message").as_str().unwrap_or("");
    for s in message_has {
        assert!(
            msg.contains(s),
            "{what}: the message must name the problem ({s:?}):\n{}",
            r.describe()
        );
    }
    assert!(
        !out.exists(),
        "{what}: nothing may run (the code would have written {}):\n{}",
        out.display(),
        r.describe()
    );
}

both!(
    /// Invalid JSON, a missing or empty language, unsafe file names (`../x`, absolute, NUL,
    /// a component over 255 bytes), unknown fields, network access: each is exit 125 with a
    /// sandbox_error object whose message names the problem, and the code never runs.
    fn bad_requests_are_refused(who) {
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        let code = "open('ran.txt', 'w').write('ran')\nprint('RAN-MARKER')\n";
        let long = "a".repeat(256);
        let with = |mut v: Value| {
            v["outputDir"] = json!(out);
            v.to_string().into_bytes()
        };
        let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = vec![
            (
                "invalid JSON",
                format!("{{\"language\": \"python\", \"code\": {code:?}, \"outputDir\": {out:?},").into_bytes(),
                vec!["line 1"],
            ),
            ("not an object", b"[1, 2]".to_vec(), vec!["a request must be a JSON object, not an array"]),
            (
                "the command line's form as an array",
                br#"["python", "print(1)"]"#.to_vec(),
                vec!["a request must be a JSON object, not an array"],
            ),
            (
                "not UTF-8",
                [&br#"{"language": "python", "code": "#[..], b"\"\xff\"}"].concat(),
                vec!["not UTF-8 (byte 0xff at offset 32"],
            ),
            (
                "an env name with =",
                with(json!({"language": "python", "code": code, "env": {"A=B": "1"}})),
                vec![r#"env: "A=B" is not a variable name"#],
            ),
            (
                "NUL in an argument",
                with(json!({"language": "python", "code": code, "args": ["x", "a\u{0}b"]})),
                vec!["args[1] (counted from 0) contains a NUL byte"],
            ),
            (
                "a timeout in seconds",
                with(json!({"language": "python", "code": code, "config": {"timeout": 5.5}})),
                vec!["config.timeout is 5.5: give a whole number of milliseconds (for 5.5 seconds, give 5500)"],
            ),
            (
                "a timeout too large",
                with(json!({"language": "python", "code": code, "config": {"timeout": 1e20}})),
                vec!["config.timeout is about 1e20, too large"],
            ),
            (
                "no files to collect",
                with(json!({"language": "python", "code": code, "config": {"collectFiles": 0}})),
                vec!["config.collectFiles is 0", "1 to 100000 files"],
            ),
            (
                "a collection over 1 GiB",
                with(json!({"language": "python", "code": code, "config": {"collectSize": 2147483648u64}})),
                vec!["config.collectSize is 2147483648", "1 to 1073741824 bytes", "in memory"],
            ),
            (
                "an unpaired surrogate escape (JSON.stringify of a string cut inside an emoji)",
                format!(r#"{{"language": "python", "code": "print('\ud800')\n{}", "outputDir": {out:?}}}"#, code.replace('\n', "\\n")).into_bytes(),
                vec!["code: the escape `\\ud800` at line 1, column 40", "not a character", "send the text as UTF-8", "base64"],
            ),
            ("missing language", with(json!({"code": code})), vec!["language"]),
            ("empty language", with(json!({"language": "", "code": code})), vec!["language"]),
            (
                "unknown language",
                with(json!({"language": "cobol-nope", "code": code})),
                vec!["cobol-nope"],
            ),
            (
                "../x file name",
                with(json!({"language": "python", "code": code, "files": {"../x": "x"}})),
                vec!["../x"],
            ),
            (
                "../x entry point",
                with(json!({"language": "python", "files": {"../x.py": code}, "entryPoint": "../x.py"})),
                vec!["../x.py"],
            ),
            (
                "an entry point read as a compiler option",
                with(json!({"language": "go", "files": {"-toolexec=/workspace/x.sh": "", "x.sh": "#!/bin/sh\nexec \"$@\"\n", "main.go": "package main\nfunc main() {}\n"}, "entryPoint": "-toolexec=/workspace/x.sh"})),
                vec!["-toolexec", "option"],
            ),
            (
                "an entry point read as an arguments file",
                with(json!({"language": "python", "files": {"@args": code}, "entryPoint": "@args"})),
                vec!["@args", "option"],
            ),
            (
                "absolute file name",
                with(json!({"language": "python", "code": code, "files": {"/tmp/x": "x"}})),
                vec!["/tmp/x", "absolute"],
            ),
            (
                "NUL in a file name",
                with(json!({"language": "python", "code": code, "files": {"a\u{0}b": "x"}})),
                vec!["NUL"],
            ),
            (
                "over-long file name",
                with(json!({"language": "python", "code": code, "files": {long.clone(): "x"}})),
                vec!["255"],
            ),
            (
                "unknown field",
                with(json!({"language": "python", "code": code, "bogusField": 1})),
                vec!["bogusField"],
            ),
            (
                "unknown config field",
                with(json!({"language": "python", "code": code, "config": {"memoryMB": 1}})),
                vec!["memoryMB"],
            ),
            (
                "unknown file field",
                with(json!({"language": "python", "code": code, "files": {"d.txt": {"content": "x", "mode": 7}}})),
                vec![],
            ),
            (
                "network on",
                with(json!({"language": "python", "code": code, "config": {"network": true}})),
                vec!["network"],
            ),
            (
                "bad base64",
                with(json!({"language": "python", "code": code, "files": {"d.bin": {"content": "!!!", "encoding": "base64"}}})),
                vec!["d.bin", "base64"],
            ),
        ];
        for (what, body, message_has) in &cases {
            let r = request(who, body);
            assert_refused(&r, what, message_has, &out);
            assert!(
                !r.finished.stdout_str().contains("RAN-MARKER"),
                "{what}: the code ran:\n{}",
                r.describe()
            );
        }
    }
);

both!(
    /// The same file-name checks on the command line: `--file ../x=PATH` and `--file
    /// /abs=PATH` are cordon errors (125) and nothing runs.
    fn bad_cli_file_names_are_refused(who) {
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        for (name, has) in [("../x", "../x"), ("/abs", "/abs")] {
            let r = cordon(who, "run")
                .arg("--lang")
                .arg("python")
                .arg("--json")
                .arg("--output-dir")
                .arg(&out)
                .arg("--file")
                .arg(format!("{name}=/etc/hostname"))
                .arg("-c")
                .arg("open('ran.txt', 'w').write('ran')")
                .run_json();
            assert_refused(&r, &format!("--file {name}=…"), &[has], &out);
        }
    }
);

both!(
    /// `cordon run`'s limit flags bound the requests it runs: a limit a request leaves out
    /// takes the flag's value, one it sets may not be above it (refused, nothing runs), and
    /// limits a request cannot set are the flag's. Flags that only mean something for code on
    /// the command line are refused instead of ignored.
    fn operator_limits_bound_requests(who) {
        let with = |req: Value, flags: &[&str]| {
            cordon(who, "run")
                .args(flags)
                .arg("--request")
                .arg("-")
                .stdin(Input::Bytes(req.to_string().into_bytes()))
                .run_json()
        };
        let sleeper = |config: Value| json!({"language": "bash", "code": "sleep 20; echo SLEPT", "config": config});
        // Above the ceiling: refused by name, with both values.
        let r = with(sleeper(json!({"timeout": 60000})), &["--timeout", "2s"]);
        assert_eq!((r.code(), r.status()), (125, "sandbox_error"), "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        for part in ["config.timeout", "60000ms", "--timeout 2s"] {
            assert!(msg.contains(part), "{part:?} in the message:\n{}", r.describe());
        }
        assert!(r.json.get("output").is_none(), "nothing ran:\n{}", r.describe());
        // Above several ceilings, the compile's among them: one answer names every one.
        let r = with(
            sleeper(json!({"timeout": 60000, "memoryLimit": 512, "compileTimeout": 90000})),
            &["--timeout", "2s", "--memory", "256M", "--compile-timeout", "1m"],
        );
        assert_eq!((r.code(), r.status()), (125, "sandbox_error"), "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        for part in [
            "config.timeout (60000ms) is above --timeout 2s",
            "config.memoryLimit (512",
            "is above --memory 256M",
            "config.compileTimeout (90000ms) is above --compile-timeout 1m",
        ] {
            assert!(msg.contains(part), "{part:?} in the message:\n{}", r.describe());
        }
        assert!(r.json.get("output").is_none(), "nothing ran:\n{}", r.describe());
        // Left out: the flag's value.
        let r = with(sleeper(json!({})), &["--timeout", "2s", "--pids", "7"]);
        assert_eq!(r.status(), "timeout", "{}", r.describe());
        assert_eq!(r.get("/limits/wallTimeMs/value"), &json!(2000), "{}", r.describe());
        assert_eq!(r.get("/limits/pids/value"), &json!(7), "{}", r.describe());
        assert!(r.get("/message").as_str().unwrap_or("").contains("raise it with config.timeout"), "{}", r.describe());
        // Within it: the request's.
        let r = with(sleeper(json!({"timeout": 1000})), &["--timeout", "2s"]);
        assert_eq!(r.get("/limits/wallTimeMs/value"), &json!(1000), "{}", r.describe());
        // The operator's 0 lifts the ceiling where 0 lifts the limit.
        let r = with(json!({"language": "bash", "code": "echo hi", "config": {"memoryLimit": 4096}}), &["--memory", "0"]);
        assert_eq!(r.expect_ok(), "hi\n", "{}", r.describe());
        assert_eq!(r.get("/limits/memoryBytes/value"), &json!(4096u64 << 20), "{}", r.describe());
        // Flags of the command line's code.
        let hello = json!({"language": "bash", "code": "echo RAN"});
        for flags in [&["--env", "A=1"][..], &["--stdin", "/etc/hostname"], &["--file", "x=/etc/hostname"]] {
            let r = with(hello.clone(), flags);
            assert_eq!(r.code(), 125, "{flags:?}:\n{}", r.describe());
            let msg = r.get("/message").as_str().unwrap_or("");
            assert!(msg.contains(flags[0]) && msg.contains("a JSON request gives them"), "{flags:?}:\n{}", r.describe());
        }
        // `code` and `entryPoint` together: refused, not one of them ignored.
        let r = with(json!({"language": "bash", "code": "echo RAN", "files": {"a.sh": "echo A"}, "entryPoint": "a.sh"}), &[]);
        assert_eq!(r.code(), 125, "{}", r.describe());
        assert!(r.get("/message").as_str().unwrap_or("").contains("not both"), "{}", r.describe());
        // --jobs belongs to --requests.
        let f = cordon(who, "run").args(["--lang", "bash", "-c", "echo RAN", "--jobs", "2"]).run();
        assert_eq!(f.code, 125, "{}", f.describe());
        assert!(!f.stdout_str().contains("RAN") && f.stderr_str().contains("--requests"), "{}", f.describe());
    }
);

// ---------------------------------------------------------------------------------------------
// Batch mode.

/// The top-level keys of a JSON object's text, in the order they are written.
fn keys_in_order(text: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = m.next_key::<String>()? {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_str::<Keys>(text)
        .unwrap_or_else(|e| panic!("not a JSON object ({e}): {text}"))
        .0
}

both!(
    /// `--request` and `--requests` always answer in JSON, a batch one line per answer: a
    /// file that cannot be read, a flag that is not one, a flag that belongs in the request
    /// (the message says the request's fields are not flags), a bad limit flag. A request's
    /// result, and the error object, have the same keys in the same order in both modes.
    fn request_modes_answer_in_json_and_a_batch_in_lines(who) {
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        let req = json!({"language": "bash", "code": "echo hi"}).to_string();
        write_world_readable(&file, format!("{req}\n[1]\n").as_bytes());
        let missing = dir.path().join("nonexist.jsonl");
        let batch = |flags: &[&str], path: &Path| {
            cordon(who, "run").args(flags).arg("--requests").arg(path).deadline(Duration::from_secs(60)).run()
        };
        for (flags, path, has) in [
            (&[][..], missing.as_path(), "cannot read the requests"),
            (&["--bogus"], file.as_path(), "are the JSON request's fields, not flags"),
            (&["--lang", "node"], file.as_path(), "are the JSON request's fields, not flags"),
            (&["--timeout", "5x"], file.as_path(), "--timeout"),
            (&["--env", "A=1"], file.as_path(), "a JSON request gives them"),
        ] {
            let f = batch(flags, path);
            assert_eq!(f.code, 125, "{flags:?}:\n{}", f.describe());
            let out = f.stdout_str();
            assert_eq!(out.lines().count(), 1, "{flags:?}: one line:\n{}", f.describe());
            let v: Value = serde_json::from_str(&out).expect("a JSON object");
            assert_eq!(v["status"], json!("sandbox_error"), "{flags:?}:\n{}", f.describe());
            assert!(v["message"].as_str().unwrap_or("").contains(has), "{flags:?}: {has:?}:\n{}", f.describe());
        }
        for flags in [&["--bogus"][..], &["--lang", "node"], &["-c", "echo RAN"]] {
            let r = cordon(who, "run")
                .args(["--request", "-"])
                .args(flags)
                .stdin(Input::Bytes(req.clone().into_bytes()))
                .run_json();
            assert_eq!(r.code(), 125, "{flags:?}:\n{}", r.describe());
            let msg = r.get("/message").as_str().unwrap_or("");
            assert!(msg.contains("are the JSON request's fields, not flags (language, code,") && msg.contains("--output-root"), "{flags:?}:\n{}", r.describe());
        }

        // The same keys in the same order, `success` first, in both modes.
        let f = batch(&["--no-history"], &file);
        let lines: Vec<String> = f.stdout_str().lines().map(String::from).collect();
        assert_eq!(lines.len(), 2, "{}", f.describe());
        let one = cordon(who, "run").args(["--no-history", "--request", "-"]).stdin(Input::Bytes(req.clone().into_bytes())).run();
        let bad = cordon(who, "run").args(["--request", "-"]).stdin(Input::Bytes(b"[1]".to_vec())).run();
        for (line, single) in [(&lines[0], &one), (&lines[1], &bad)] {
            let keys = keys_in_order(line);
            assert_eq!(keys[..2], ["success", "status"], "{line}");
            assert_eq!(keys, keys_in_order(&single.stdout_str()), "{}", single.describe());
        }
    }
);

both!(
    /// A batch's workers take `cordon run`'s limit flags, and an invalid line's error names
    /// its line in the file (blank lines are skipped, not answered).
    fn batch_workers_take_the_limits_and_name_bad_lines(who) {
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        let good = json!({"language": "bash", "code": "sleep 20"}).to_string();
        write_world_readable(&file, format!("{good}\n\n{{bad\n").as_bytes());
        let f = cordon(who, "run")
            .args(["--timeout", "1s", "--requests"])
            .arg(&file)
            .deadline(Duration::from_secs(60))
            .run();
        assert_eq!(f.code, 1, "a failed request makes the batch exit 1:\n{}", f.describe());
        let got = f.json_lines();
        assert_eq!(got.len(), 2, "{}", f.describe());
        assert_eq!(got[0]["status"], json!("timeout"), "{}", f.describe());
        assert_eq!(got[0]["limits"]["wallTimeMs"]["value"], json!(1000), "{}", f.describe());
        let msg = got[1]["message"].as_str().unwrap_or("");
        assert!(msg.starts_with("line 3 of the requests: invalid request"), "{}", f.describe());
        assert_eq!(got[1]["errorKind"], json!("request"), "{}", f.describe());
    }
);

both!(
    /// What a client must change is told apart from what the host lacks without reading the
    /// message: `errorKind` is `request` for a request or command line that cannot run as
    /// asked (a field's bad value, an unknown language, a flag clap refuses).
    fn errors_before_a_run_say_whose_they_are(who) {
        for (what, req) in [
            ("a bad field", json!({"language": "python", "code": "print(1)", "env": {"1A": "x"}})),
            ("an unknown language", json!({"language": "cobol-nope", "code": "x"})),
            ("a missing entry point", json!({"language": "python", "files": {"a.py": "1"}, "entryPoint": "b.py"})),
        ] {
            let r = request(who, req.to_string().as_bytes());
            assert_eq!((r.status(), r.code()), ("sandbox_error", 125), "{what}:\n{}", r.describe());
            assert_eq!(r.get("/errorKind"), &json!("request"), "{what}:\n{}", r.describe());
        }
        let r = cordon(who, "run").args(["--json", "--no-such-flag", "-c", "1"]).run_json();
        assert_eq!(r.get("/errorKind"), &json!("request"), "{}", r.describe());
        // The launcher's refusal of what it was given is the request's too.
        let r = exec_json_run(who, &["--stdin", "/nonexistent-cordon-stdin"], &["true"]);
        assert_eq!((r.status(), r.get("/errorKind")), ("sandbox_error", &json!("request")), "{}", r.describe());
    }
);

both!(
    /// A byte order mark before a request is skipped, in both modes; a batch line that is not
    /// UTF-8 is that line's error (with the offset), and the other lines still run.
    fn a_byte_order_mark_is_skipped_and_a_line_not_utf8_is_its_own_error(who) {
        let bom = "\u{feff}";
        let r = request(who, format!(r#"{bom}{{"language": "bash", "code": "echo bom"}}"#).as_bytes());
        assert_eq!(r.expect_ok(), "bom\n", "{}", r.describe());
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        let mut lines = format!("{bom}{}\r\n", json!({"language": "bash", "code": "echo one"})).into_bytes();
        lines.extend_from_slice(b"{\"language\": \"bash\", \"code\": \"echo \xfe\"}\n");
        lines.extend_from_slice(format!("{}\n", json!({"language": "bash", "code": "echo three"})).as_bytes());
        write_world_readable(&file, &lines);
        let f = cordon(who, "run").arg("--requests").arg(&file).deadline(Duration::from_secs(60)).run();
        assert_eq!(f.code, 1, "{}", f.describe());
        let got = f.json_lines();
        assert_eq!(got.len(), 3, "{}", f.describe());
        assert_eq!((&got[0]["output"], &got[2]["output"]), (&json!("one\n"), &json!("three\n")), "{}", f.describe());
        let msg = got[1]["message"].as_str().unwrap_or("");
        assert!(
            msg.starts_with("line 2 of the requests: invalid request: it is not UTF-8 (byte 0xfe at offset 35"),
            "{}",
            f.describe()
        );
    }
);

/// Whether `pid` is gone or a zombie (dead, waiting for a reaper that may never come).
fn dead(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    matches!(after.split_whitespace().next(), None | Some("Z" | "X"))
}

/// Whether `pid`'s command line holds the argument `arg`.
fn has_arg(pid: i32, arg: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .any(|a| a == arg.as_bytes())
}

both!(
    /// A batch SIGKILLed in the middle (it cannot clean up) takes its `--request-line`
    /// workers and their sandboxes with it: each worker has PR_SET_PDEATHSIG.
    fn a_killed_batch_leaves_no_worker_or_sandbox(who) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let mark = marker(who, 42);
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        let req = json!({"language": "bash", "code": format!("sleep 3600 {mark}\ntrue\n")}).to_string();
        write_world_readable(&file, format!("{req}\n{req}\n").as_bytes());
        let run = cordon(who, "run")
            .args(["--timeout", "120s", "--jobs", "2", "--requests"])
            .arg(&file);
        let mut child = run.spawn(std::process::Stdio::piped(), std::process::Stdio::piped());
        let found = wait_until(Duration::from_secs(30), || procs_matching(&mark).len() == 2);
        let sleepers = procs_matching(&mark);
        if !found {
            let _ = child.kill();
            let _ = child.wait();
            assert_none_left(&mark, Duration::from_secs(5), "");
            panic!("the two requests never reached `sleep {mark}`: {sleepers:?}");
        }
        // Up from each sleeper to its worker (`cordon run ... --request-line N`).
        let worker_of = |pid: i32| {
            let mut p = pid;
            for _ in 0..6 {
                p = ppid(p);
                if p <= 1 || has_arg(p, "--request-line") {
                    break;
                }
            }
            p
        };
        let workers: Vec<i32> = sleepers.iter().map(|p| worker_of(*p as i32)).collect();
        let batch = ppid(workers[0]);
        // Checked before any signal: a wrong pid here must not kill anything else.
        assert!(
            workers.iter().all(|w| *w > 1 && has_arg(*w, "--request-line") && ppid(*w) == batch)
                && batch > 1
                && has_arg(batch, "--requests")
                && comm(batch).starts_with("cordon"),
            "unexpected processes: sleepers {sleepers:?}, workers {workers:?}, batch {batch}"
        );
        kill(Pid::from_raw(batch), Signal::SIGKILL).unwrap();
        let _ = child.wait();
        let gone = wait_until(Duration::from_secs(10), || workers.iter().all(|w| dead(*w)));
        for w in &workers {
            if !dead(*w) {
                let _ = kill(Pid::from_raw(*w), Signal::SIGKILL);
            }
        }
        assert!(gone, "workers {workers:?} outlived their SIGKILLed batch {batch}");
        assert_none_left(&mark, Duration::from_secs(10), "the sandboxes of a killed batch");
    }
);

both!(
    /// Six requests whose run times decrease (the first sleeps longest) with --jobs 3: one
    /// compact JSON result per line, in input order, and the jobs really ran in parallel.
    fn batch_keeps_input_order(who) {
        let sleeps = [2.5, 2.0, 1.5, 1.0, 0.5, 0.0];
        let mut lines = String::new();
        for (i, s) in sleeps.iter().enumerate() {
            let req = json!({
                "language": "python",
                "code": format!("import time\ntime.sleep({s})\nprint('job {i}')\n"),
            });
            lines.push_str(&req.to_string());
            lines.push('\n');
        }
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        write_world_readable(&file, lines.as_bytes());

        let f = cordon(who, "run")
            .arg("--requests")
            .arg(&file)
            .arg("--jobs")
            .arg("3")
            .deadline(Duration::from_secs(120))
            .run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let out = f.stdout_str();
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got.len(), 6, "one line per request:\n{}", f.describe());
        for (i, line) in got.iter().enumerate() {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!("line {i} is not one compact JSON object ({e}):\n{}", f.describe())
            });
            assert_eq!(v["status"], json!("ok"), "line {i}:\n{}", f.describe());
            assert_eq!(
                v["output"],
                json!(format!("job {i}\n")),
                "results must come in input order (line {i}):\n{}",
                f.describe()
            );
        }
        let sequential: f64 = sleeps.iter().sum();
        assert!(
            f.elapsed < Duration::from_secs_f64(sequential),
            "--jobs 3 must run requests in parallel: {:?} is not less than the {sequential} s \
             the sleeps take one after another:\n{}",
            f.elapsed,
            f.describe()
        );
    }
);

both!(
    /// A refused request costs cordon a bounded amount of memory also when its `id` is huge:
    /// the error's id is read without building the value (10 million array items, which
    /// would take hundreds of MiB as a JSON tree, under a 256 MiB address space).
    fn a_huge_id_in_a_refused_request_is_not_built(who) {
        let dir = shared_tempdir();
        let file = dir.path().join("big.json");
        let mut text = String::from(r#"{"id":["#);
        text.push_str(&vec!["0"; 10_000_000].join(","));
        text.push_str(r#"],"language":"bash","code":"echo RAN"}"#);
        write_world_readable(&file, text.as_bytes());
        let f = cordon(who, "run")
            .shell_setup("ulimit -v 262144")
            .args(["--no-history", "--request"])
            .arg(&file)
            .deadline(Duration::from_secs(120))
            .run();
        assert_eq!(f.code, 125, "{}", f.describe());
        let v: Value = serde_json::from_slice(&f.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", f.describe()));
        assert!(v["message"].as_str().unwrap_or("").contains("more than 1048576 JSON values"), "{}", f.describe());
        assert!(v.get("id").is_none(), "{}", f.describe());
    }
);

both!(
    /// `--unordered`: each result is printed as its request ends, starting with `line` (its
    /// line in the file), and a slow request holds up neither the results after it nor a
    /// free slot: with --jobs 2, the four quick requests run in the second slot and all
    /// answer before the slow first one.
    fn unordered_batch_answers_as_requests_end(who) {
        let mut lines = String::new();
        lines.push_str(&json!({"id": "slow", "language": "bash", "code": "sleep 6; echo slow"}).to_string());
        lines.push_str("\n\n");
        for i in 0..4 {
            lines.push_str(&json!({"id": i, "language": "bash", "code": format!("echo quick {i}")}).to_string());
            lines.push('\n');
        }
        // An invalid request still answers with its line and, as it can be read, its id.
        lines.push_str(r#"{"id": "bad", "language": "bash", "code": "echo no", "bogus": 1}"#);
        lines.push('\n');
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        write_world_readable(&file, lines.as_bytes());
        let f = cordon(who, "run")
            .args(["--no-history", "--jobs", "2", "--unordered", "--requests"])
            .arg(&file)
            .deadline(Duration::from_secs(120))
            .run();
        assert_eq!(f.code, 1, "the bad request makes the batch exit 1:\n{}", f.describe());
        let out = f.stdout_str();
        let got = f.json_lines();
        assert_eq!(got.len(), 6, "one line per request:\n{}", f.describe());
        for l in out.lines() {
            let keys = keys_in_order(l);
            assert_eq!(&keys[..3], ["line", "id", "success"], "{l}");
        }
        let slow = got.last().unwrap();
        assert_eq!((&slow["id"], &slow["line"], &slow["output"]), (&json!("slow"), &json!(1), &json!("slow\n")), "the slow request answers last:\n{}", f.describe());
        for i in 0..4 {
            let v = got.iter().find(|v| v["id"] == json!(i)).unwrap_or_else(|| panic!("no result with id {i}:\n{}", f.describe()));
            assert_eq!(v["line"], json!(i + 3), "blank lines count in `line`:\n{}", f.describe());
            assert_eq!(v["output"], json!(format!("quick {i}\n")), "{}", f.describe());
        }
        let bad = got.iter().find(|v| v["id"] == json!("bad")).unwrap_or_else(|| panic!("no result for the bad request:\n{}", f.describe()));
        assert_eq!(bad["line"], json!(7), "{}", f.describe());
        assert_eq!(bad["errorKind"], json!("request"), "{}", f.describe());

        // Without a --requests file, --unordered means nothing: refused, nothing run.
        let r = cordon(who, "run").args(["--unordered", "--json", "-c", "echo RAN", "--lang", "bash"]).run();
        assert_eq!(r.code, 125, "{}", r.describe());
        assert!(!r.stdout_str().contains("RAN") && r.stdout_str().contains("--unordered prints the results of a --requests file"), "{}", r.describe());
    }
);

both!(
    /// A request's `id` (a string or an integer) is echoed as its result's first key, in a
    /// result and in the error of a request refused for another field; an id of another
    /// kind is refused, naming it.
    fn a_requests_id_is_echoed_first(who) {
        let r = request(who, br#"{"id": "job-17", "language": "bash", "code": "echo hi"}"#);
        assert_eq!(r.code(), 0, "{}", r.describe());
        assert_eq!(r.get("/id"), &json!("job-17"), "{}", r.describe());
        assert_eq!(r.get("/output"), &json!("hi\n"), "{}", r.describe());
        assert_eq!(&keys_in_order(&r.finished.stdout_str())[..2], ["id", "success"], "{}", r.describe());

        let r = request(who, br#"{"id": 18446744073709551615, "language": "bash", "code": "echo hi", "config": {"timeout": 1.5}}"#);
        assert_eq!(r.code(), 125, "{}", r.describe());
        assert_eq!(r.get("/id"), &json!(18446744073709551615u64), "{}", r.describe());
        assert_eq!(r.get("/errorKind"), &json!("request"), "{}", r.describe());

        let r = request(who, br#"{"language": "bash", "code": "echo hi"}"#);
        assert_eq!(r.code(), 0, "{}", r.describe());
        assert!(!keys_in_order(&r.finished.stdout_str()).contains(&"id".to_string()), "no id given, none echoed:\n{}", r.describe());

        let long = format!(r#"{{"id": "{}", "language": "bash", "code": "echo RAN"}}"#, "x".repeat(257));
        for (req, says) in [
            (r#"{"id": 1.5, "language": "bash", "code": "echo RAN"}"#.to_string(), "id is 1.5: give a string of at most 256 bytes or an integer"),
            (r#"{"id": {"a": 1}, "language": "bash", "code": "echo RAN"}"#.to_string(), r#"id is {"a":1}: give a string"#),
            (long, "id is a string of 257 bytes: give at most 256, or an integer"),
        ] {
            let r = request(who, req.as_bytes());
            assert_eq!(r.code(), 125, "{req}:\n{}", r.describe());
            let msg = r.get("/message").as_str().unwrap_or("");
            assert!(msg.contains(says) && r.get("/output").is_null(), "{req}: {says:?}:\n{}", r.describe());
            assert!(r.get("/id").is_null(), "an id that is refused is not echoed:\n{}", r.describe());
        }
    }
);

both!(
    /// `--stream` for requests: `--request` prints the program's output as JSON lines before
    /// its one-line result (with the request's id); `--requests --unordered` tags every line
    /// with its request's line, and each request's pieces add up to its result's output.
    /// Results in input order would hold back the lines, so `--requests` needs `--unordered`.
    fn requests_stream_their_output(who) {
        let f = cordon(who, "run")
            .args(["--no-history", "--request", "-", "--stream"])
            .stdin(Input::Bytes(br#"{"id": 5, "language": "bash", "code": "echo out; echo err >&2"}"#.to_vec()))
            .run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let lines = f.json_lines();
        let (result, events) = lines.split_last().unwrap_or_else(|| panic!("{}", f.describe()));
        assert_eq!((&result["id"], &result["output"]), (&json!(5), &json!("out\n")), "{}", f.describe());
        let mut seen: Vec<Value> = events.to_vec();
        seen.sort_by_key(|v| v.to_string());
        assert_eq!(seen, [json!({"stderr": "err\n"}), json!({"stdout": "out\n"})], "{}", f.describe());

        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        let lines_in = [
            json!({"id": "first", "language": "bash", "code": "for i in 1 2 3; do echo a$i; sleep 0.1; done"}),
            json!({"language": "python", "code": "import sys\nprint('b1', flush=True)\nprint('b2', file=sys.stderr)"}),
        ];
        let text: String = lines_in.iter().map(|v| format!("{v}\n")).collect();
        write_world_readable(&file, text.as_bytes());
        let f = cordon(who, "run")
            .args(["--no-history", "--jobs", "2", "--unordered", "--stream", "--requests"])
            .arg(&file)
            .deadline(Duration::from_secs(120))
            .run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let out = f.stdout_str();
        let got = f.json_lines();
        for n in [1, 2] {
            let mine: Vec<&Value> = got.iter().filter(|v| v["line"] == json!(n)).collect();
            let (result, events) = mine.split_last().unwrap_or_else(|| panic!("nothing for line {n}:\n{}", f.describe()));
            assert!(result.get("success").is_some(), "line {n}'s result is its last line:\n{}", f.describe());
            let piece = |v: &&Value, k: &str| v.get(k).and_then(Value::as_str).map(String::from);
            let stdout: String = events.iter().filter_map(|v| piece(v, "stdout")).collect();
            let stderr: String = events.iter().filter_map(|v| piece(v, "stderr")).collect();
            assert_eq!((Some(stdout.as_str()), Some(stderr.as_str())), (result["output"].as_str(), result["error"].as_str()), "line {n}:\n{}", f.describe());
            assert!(!stdout.is_empty(), "line {n} streamed its output:\n{}", f.describe());
            // Pieces name their request as its result does: `line`, then the id if it has one.
            let want: &[&str] = if n == 1 { &["line", "id"] } else { &["line"] };
            for l in out.lines().filter(|l| l.starts_with(&format!("{{\"line\":{n},")) && !l.contains("\"success\"")) {
                let keys = keys_in_order(l);
                assert_eq!(&keys[..keys.len() - 1], want, "{l}");
            }
            let id = if n == 1 { json!("first") } else { Value::Null };
            assert_eq!(result.get("id").unwrap_or(&Value::Null), &id, "{}", f.describe());
        }

        for flags in [&["--requests"][..], &["--jobs", "2", "--requests"], &["--json", "--requests"]] {
            let f = cordon(who, "run").arg("--stream").args(flags).arg(&file).run();
            assert_eq!(f.code, 125, "{}", f.describe());
            let v: Value = serde_json::from_str(f.stdout_str().trim()).unwrap_or_else(|e| panic!("{e}:\n{}", f.describe()));
            assert!(v["message"].as_str().unwrap_or("").contains("--requests FILE --unordered"), "{}", f.describe());
        }
        let f = cordon(who, "run").args(["--stream", "--lang", "bash", "-c", "echo RAN"]).run();
        assert_eq!(f.code, 125, "{}", f.describe());
        assert!(!f.stdout_str().contains("RAN"), "{}", f.describe());
    }
);

both!(
    /// In input order, a slow request holds up no free slot: with --jobs 2 the requests
    /// after it start while it runs; but the batch holds at most 2 results that wait for it,
    /// so the fourth starts only once it has ended. Each request prints the host clock
    /// (the sandbox shares it) when it starts, the slow one also when it ends.
    fn an_ordered_batch_refills_slots_but_holds_few_results(who) {
        let mut text = json!({"language": "bash", "code": "date +%s%N; sleep 3; date +%s%N"}).to_string();
        text.push('\n');
        for _ in 0..3 {
            text.push_str(&json!({"language": "bash", "code": "date +%s%N"}).to_string());
            text.push('\n');
        }
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        write_world_readable(&file, text.as_bytes());
        let f = cordon(who, "run")
            .args(["--no-history", "--jobs", "2", "--requests"])
            .arg(&file)
            .deadline(Duration::from_secs(120))
            .run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let times: Vec<Vec<u128>> = f
            .json_lines()
            .iter()
            .map(|v| v["output"].as_str().unwrap_or("").lines().map(|t| t.parse().unwrap_or_else(|e| panic!("{e}: {t:?}"))).collect())
            .collect();
        assert_eq!(times.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1, 1, 1], "{}", f.describe());
        let slow_end = times[0][1];
        assert!(times[2][0] < slow_end, "the third request must start while the first runs:\n{}", f.describe());
        assert!(times[3][0] > slow_end, "the fourth must wait: two results are held already:\n{}", f.describe());
    }
);

// ---------------------------------------------------------------------------------------------
// Profiles.

/// The first line a host tool prints for its version.
fn host_version(argv: &[&str]) -> Option<String> {
    let out = Command::new(argv[0]).args(&argv[1..]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().next().map(|l| l.trim().to_string())
}

both!(
    /// `cordon profiles --json` lists the five languages, which of them compile, and each
    /// version (equal to the host tool's own on the host rootfs).
    fn profiles_list_the_languages(who) {
        let f = cordon(who, "profiles").arg("--json").run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let list: Value = serde_json::from_slice(&f.stdout)
            .unwrap_or_else(|e| panic!("profiles --json is not JSON ({e}):\n{}", f.describe()));
        let list = list
            .as_array()
            .unwrap_or_else(|| panic!("profiles --json must be an array:\n{}", f.describe()));
        let langs: [(&str, bool, &str, &[&str]); 5] = [
            ("python", false, "Python 3.", &["/usr/bin/python3", "--version"]),
            ("node", false, "v", &["/usr/bin/node", "--version"]),
            ("go", true, "go version go1.", &["/usr/bin/go", "version"]),
            ("rust", true, "rustc 1.", &["/usr/bin/rustc", "--version"]),
            ("bash", false, "GNU bash", &["/usr/bin/bash", "--version"]),
        ];
        for (name, compiled, prefix, version_cmd) in langs {
            let p = list
                .iter()
                .find(|p| p["language"] == json!(name))
                .unwrap_or_else(|| panic!("{name} missing from profiles:\n{}", f.describe()));
            assert_eq!(p["compiled"], json!(compiled), "{name}:\n{}", f.describe());
            let version = p["version"].as_str().unwrap_or("");
            assert!(
                version.starts_with(prefix),
                "{name}: version {version:?} must start with {prefix:?}:\n{}",
                f.describe()
            );
            assert!(
                p["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{name}: a description:\n{}",
                f.describe()
            );
            let rootfs = p["rootfs"].as_str().unwrap_or("");
            assert!(!rootfs.is_empty(), "{name}: which rootfs:\n{}", f.describe());
            // The host rootfs exposes /usr: the version is that of the host's /usr/bin tool
            // (not whatever a pyenv or rustup shim on the test's PATH would run).
            if rootfs == "host"
                && let Some(host) = host_version(version_cmd)
            {
                assert_eq!(version, host, "{name}: the host tool's version:\n{}", f.describe());
            }
        }
    }
);

both!(
    /// `cordon profiles` (a table) names every language, one line each, newline-terminated.
    fn profiles_table(who) {
        let f = cordon(who, "profiles").run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let out = f.stdout_str();
        for name in ["python", "node", "go", "rust", "bash"] {
            assert!(
                out.lines().any(|l| l.split_whitespace().next() == Some(name)),
                "{name} must have a line:\n{}",
                f.describe()
            );
        }
        assert!(
            out.ends_with('\n'),
            "the table must end with a newline (else the shell prompt or the next output is glued to it):\n{}",
            f.describe()
        );
    }
);

// ---------------------------------------------------------------------------------------------
// Files after cordon ended the run early.

/// Writes a file, leaves a stopped child and a busy one behind, then either sleeps past the
/// timeout or floods stdout past the output limit.
const EARLY_END: &str = r#"import os, signal, sys, time
open("partial.txt", "w").write("half done\n")
if os.fork() == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
if os.fork() == 0:
    while True: pass
print("working", flush=True)
if sys.argv[1] == "flood":
    while True: sys.stdout.write("x" * 65536)
time.sleep(60)
"#;

both!(
    /// A timeout, and an output-limit kill: every process dies at once (a stopped one too),
    /// the status says why, and the file the program wrote before is still collected and
    /// arrives in --output-dir.
    fn files_are_collected_after_timeout_and_output_limit(who) {
        for (mode, status, code) in [("sleep", "timeout", 124), ("flood", "output_limit", 137)] {
            let out_parent = writable_dir(who);
            let out = out_parent.path().join("out");
            let r = cordon(who, "run")
                .args(["--lang", "python", "--json", "--no-history", "--timeout", "3s", "--output-limit", "1M"])
                .arg("--output-dir")
                .arg(&out)
                .args(["-c", EARLY_END, "--", mode])
                .deadline(Duration::from_secs(30))
                .run_json();
            assert_eq!(r.status(), status, "{mode}:\n{}", r.describe());
            assert_eq!(r.code(), code, "{mode}:\n{}", r.describe());
            assert!(r.elapsed() < Duration::from_secs(20), "{mode}: took {:?}:\n{}", r.elapsed(), r.describe());
            let files = r.files();
            assert!(files.iter().any(|(p, size)| p == "partial.txt" && *size == 10), "{mode}: files {files:?}:\n{}", r.describe());
            assert_eq!(std::fs::read_to_string(out.join("partial.txt")).ok().as_deref(), Some("half done\n"), "{mode}:\n{}", r.describe());
        }
    }
);

both!(
    /// `--output-root` and `--request-net` confine JSON requests: without --request or
    /// --requests they would do nothing, so they are refused (exit 125, nothing run) rather
    /// than silently ignored.
    fn request_only_flags_without_a_request_are_refused(who) {
        let root = writable_dir(who);
        for flags in [
            vec!["--output-root", root.path().to_str().unwrap()],
            vec!["--request-net", "none"],
            vec!["--request-net", "public"],
        ] {
            let f = cordon(who, "run")
                .args(["--lang", "bash", "--no-history", "-c", "echo ran"])
                .args(&flags)
                .run();
            assert_eq!(f.code, 125, "{flags:?}:\n{}", f.describe());
            assert!(!f.stdout_str().contains("ran"), "{flags:?}: the code ran:\n{}", f.describe());
            let err = f.stderr_str();
            assert!(
                err.contains(flags[0]) && err.contains("there is no request") && err.contains("--requests FILE"),
                "{flags:?}:\n{}",
                f.describe()
            );
        }
    }
);

both!(
    /// With `--output-root`, a request's outputDir lands under it (a relative one) or is
    /// refused (outside it, or with `..`) before anything runs: a request written by code the
    /// operator does not trust cannot make cordon write the program's files anywhere the
    /// operator can. A request cannot lift a limit either (0 lifts one on the command line).
    fn output_root_confines_output_dir_and_zero_limits_are_refused(who) {
        let root = writable_dir(who);
        let elsewhere = writable_dir(who);
        let code = |out: &str| {
            json!({"language": "python", "code": "open('f.txt','w').write('hi')", "outputDir": out})
                .to_string()
        };
        let confined = |text: String| {
            cordon(who, "run")
                .args(["--output-root", root.path().to_str().unwrap(), "--request", "-"])
                .stdin(Input::Bytes(text.into_bytes()))
                .run_json()
        };
        let r = confined(code("job1"));
        assert_eq!(r.status(), "ok", "{}", r.describe());
        assert_eq!(
            std::fs::read_to_string(root.path().join("job1/f.txt")).ok().as_deref(),
            Some("hi"),
            "{}",
            r.describe()
        );
        // (cordon would have made the directory, had the request run.)
        let away = elsewhere.path().join("out");
        for out in [away.to_str().unwrap(), "../out", "job/../../out"] {
            let r = confined(code(out));
            assert_refused(&r, out, &["--output-root"], &away);
        }
        // Nothing already under the root is overwritten: not the root itself (`.`, ``, its
        // absolute path), not another request's directory; and a symlink kept under the root
        // is not followed out of it.
        let theirs = root.path().join("job1/f.txt");
        std::fs::write(root.path().join("f.txt"), "operator's").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("latest")).unwrap();
        for (out, why) in [
            (".", "itself"),
            ("", "itself"),
            (root.path().to_str().unwrap(), "itself"),
            ("job1", "already exists"),
            ("latest/out", "symlink"),
        ] {
            let r = confined(code(out));
            assert_refused(&r, out, &["--output-root", why], &away);
        }
        assert_eq!(std::fs::read_to_string(root.path().join("f.txt")).unwrap(), "operator's");
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "hi");
        // A new directory below an existing one is fine.
        let r = confined(code("job1/again"));
        assert_eq!(r.status(), "ok", "{}", r.describe());
        assert!(root.path().join("job1/again/f.txt").exists(), "{}", r.describe());
        let r = request(
            who,
            json!({"language": "python", "code": "print(1)", "config": {"memoryLimit": 0}})
                .to_string()
                .as_bytes(),
        );
        assert_refused(&r, "memoryLimit 0", &["config.memoryLimit", "lift"], &away);
    }
);

both!(
    /// With `--request-net public`, a request cannot reach the host's loopback (directly, by
    /// `localhost`, or as its package index) or ask for the host's network, and nothing runs;
    /// a public name still runs. With `--request-net none` no network at all, also through
    /// the batch mode's child processes (`--requests --jobs`).
    fn request_net_confines_what_a_request_may_reach(who) {
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        let code = "open('f.txt','w').write('hi')";
        let scoped = |scope: &str, req: Value| {
            cordon(who, "run")
                .args(["--request-net", scope, "--no-history", "--request", "-"])
                .stdin(Input::Bytes(req.to_string().into_bytes()))
                .run_json()
        };
        for (what, extra) in [
            ("loopback literal", json!({"config": {"network": "allow=127.0.0.1:9090"}})),
            ("localhost", json!({"config": {"network": "allow=localhost:9090"}})),
            ("metadata", json!({"config": {"network": "allow=169.254.169.254:80"}})),
            ("host network", json!({"config": {"network": "host"}})),
            (
                "loopback index",
                json!({"packages": ["x"], "packageIndex": "http://127.0.0.1:9090/simple/"}),
            ),
        ] {
            let mut req = json!({"language": "python", "code": code, "outputDir": out});
            for (k, v) in extra.as_object().unwrap() {
                req[k] = v.clone();
            }
            let r = scoped("public", req);
            assert_refused(&r, what, &["--request-net public"], &out);
        }
        let r = scoped(
            "public",
            json!({"language": "python", "code": "print('public ok')",
                   "config": {"network": "allow=pypi.org"}}),
        );
        assert_eq!(r.status(), "ok", "{}", r.describe());
        assert_eq!(r.get("/output"), &json!("public ok\n"), "{}", r.describe());

        let r = scoped(
            "none",
            json!({"language": "python", "code": code, "outputDir": out,
                   "config": {"network": "allow=pypi.org"}}),
        );
        assert_refused(&r, "network under none", &["--request-net none"], &out);

        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        let line = json!({"language": "python", "code": code, "outputDir": out,
                          "config": {"network": "allow=pypi.org"}});
        write_world_readable(&file, format!("{line}\n").as_bytes());
        let f = cordon(who, "run")
            .args(["--request-net", "none", "--no-history", "--jobs", "2", "--requests"])
            .arg(&file)
            .run();
        let v: Value = serde_json::from_str(f.stdout_str().trim()).unwrap_or_else(|e| {
            panic!("one JSON line ({e}):\n{}", f.describe())
        });
        assert_eq!(v["status"], json!("sandbox_error"), "{}", f.describe());
        assert!(
            v["message"].as_str().unwrap_or("").contains("--request-net none"),
            "{}",
            f.describe()
        );
        assert!(!out.exists(), "nothing may run:\n{}", f.describe());
    }
);

// ---------------------------------------------------------------------------------------------
// Large files, and a collection cut short.

/// Writes `big.bin`: argv[1] MiB of seeded pseudo-random bytes, 1 MiB at a time (so the
/// program itself never holds much), and prints their SHA-256.
const BIG_FILE: &str = r#"import hashlib, random, sys
rng, h = random.Random(7), hashlib.sha256()
with open("big.bin", "wb") as f:
    for _ in range(int(sys.argv[1])):
        block = rng.randbytes(1 << 20)
        h.update(block)
        f.write(block)
print(h.hexdigest())
"#;

/// Runs BIG_FILE for `mib` MiB under `memory_mb` and checks that big.bin arrives whole in
/// outputDir, with status ok and no OOM kill.
fn big_file_arrives_whole(who: Who, mib: u64, memory_mb: u64) {
    let out_parent = writable_dir(who);
    let out = out_parent.path().join("out");
    let req = json!({
        "language": "python", "code": BIG_FILE, "args": [mib.to_string()],
        "outputDir": out,
        "config": {"timeout": 60000, "memoryLimit": memory_mb},
    });
    let r = cordon(who, "run")
        .args(["--request", "-", "--no-history"])
        .stdin(Input::Bytes(serde_json::to_vec(&req).unwrap()))
        .deadline(Duration::from_secs(120))
        .run_json();
    let what = format!("{mib} MiB under {memory_mb} MB");
    assert_eq!(r.status(), "ok", "{what}:\n{}", r.describe());
    assert_eq!(r.code(), 0, "{what}:\n{}", r.describe());
    assert_eq!(
        r.get("/oomKilled"),
        &json!(false),
        "{what}:\n{}",
        r.describe()
    );
    assert_eq!(r.get("/message"), &Value::Null, "{what}:\n{}", r.describe());
    assert_eq!(
        r.files(),
        [("big.bin".to_string(), mib << 20)],
        "{what}:\n{}",
        r.describe()
    );
    let data = std::fs::read(out.join("big.bin"))
        .unwrap_or_else(|e| panic!("{what}: outputDir/big.bin: {e}\n{}", r.describe()));
    assert_eq!(data.len() as u64, mib << 20, "{what}: size in outputDir");
    assert_eq!(
        sha256_hex(&data),
        r.output().trim(),
        "{what}: the contents differ from what the program wrote"
    );
}

both!(
    /// A 40 MiB file (under the 64 MiB collection cap) is collected whole, with status ok.
    /// (It used to be sent as one JSON line that cordon re-scanned on every read: quadratic,
    /// past a 20 s timeout, and the file was lost.)
    fn a_large_file_is_collected_whole(who) {
        big_file_arrives_whole(who, 40, 512);
    }
);

both!(
    /// A 30 MiB file under a 128 MB memory limit is collected whole: init streams it in
    /// chunks. (init used to hold it about 4.5 times over in the sandbox's memory cgroup, was
    /// OOM-killed mid-collection, and the run still said ok, with no files.)
    fn a_file_near_the_memory_limit_is_collected(who) {
        big_file_arrives_whole(who, 30, 128);
    }
);

/// Writes a 4 MiB file, then waits in `sleep MARKER` until SIGTERM, on which it exits 0.
/// Its argument is `m=MARKER` (cordon's own argv must not hold the marker as an element).
const CUT_SHORT: &str = r#"import os, signal, subprocess, sys
open("big.bin", "wb").write(b"a" * (4 << 20))
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
subprocess.run(["sleep", "3600", sys.argv[1][2:]])
"#;

/// The command name of `pid`.
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The parent pid of `pid`, from /proc/PID/stat.
fn ppid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    after
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

both!(
    /// init killed in the middle of the collection, deterministically: cordon is stopped,
    /// the program exits 0, init blocks in write(2) on the full report pipe in the middle of
    /// big.bin, and is SIGKILLed there. The run must not pass for a success with the file
    /// silently missing: sandbox_error, exit 125, exitCode 0, a message saying the collection
    /// was cut short, big.bin listed as cut off, nothing in outputDir.
    fn a_collection_cut_short_is_reported(who) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        if !running_as_root() {
            skip!("SKIP: a_collection_cut_short_is_reported: reading init's /proc/PID/syscall needs root");
            return;
        }
        let mark = marker(who, 41);
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        let run = cordon(who, "run")
            .args(["--lang", "python", "--json", "--no-history", "--timeout", "60s"])
            .arg("--output-dir")
            .arg(&out)
            .args(["-c", CUT_SHORT, "--", &format!("m={mark}")]);
        let start = std::time::Instant::now();
        let child = run.spawn(std::process::Stdio::piped(), std::process::Stdio::piped());
        let mut sleeper = 0;
        let found = wait_until(Duration::from_secs(30), || {
            sleeper = procs_matching(&mark).first().map_or(0, |p| *p as i32);
            sleeper != 0
        });
        assert!(found, "the program never reached `sleep {mark}`");
        let py = ppid(sleeper);
        let init = ppid(py);
        let cordon_pid = ppid(init);
        // Checked before any signal: a wrong pid here must not stop or kill anything else.
        let chain = [(sleeper, "sleep"), (py, "python3"), (init, "cordon"), (cordon_pid, "cordon")];
        let names: Vec<String> = chain.iter().map(|(p, _)| comm(*p)).collect();
        assert!(
            chain.iter().zip(&names).all(|((p, want), got)| *p > 1 && got.starts_with(want)),
            "unexpected process chain: {chain:?} are {names:?}"
        );
        kill(Pid::from_raw(cordon_pid), Signal::SIGSTOP).unwrap();
        kill(Pid::from_raw(py), Signal::SIGTERM).unwrap();
        // init is blocked in write(2), sending big.bin (4 MiB > the pipe).
        let write_nr = format!("{} ", libc::SYS_write);
        let blocked = wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(format!("/proc/{init}/syscall"))
                .is_ok_and(|s| s.starts_with(&write_nr))
        });
        let _ = kill(Pid::from_raw(init), Signal::SIGKILL);
        kill(Pid::from_raw(cordon_pid), Signal::SIGCONT).unwrap();
        let finished = wait_with_deadline(child, start, Duration::from_secs(60), run.argv());
        assert!(blocked, "init never blocked writing to the report pipe:\n{}", finished.describe());
        let json: Value = serde_json::from_slice(&finished.stdout)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{}", finished.describe()));
        let r = JsonRun { json, finished };
        assert_eq!(r.status(), "sandbox_error", "{}", r.describe());
        assert_eq!(r.code(), 125, "{}", r.describe());
        assert_eq!(r.get("/exitCode"), &json!(0), "the program's own exit stands:\n{}", r.describe());
        assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
        let message = r.get("/message").as_str().unwrap_or("");
        assert!(
            message.contains("could not collect all the files") && message.contains("killed by SIGKILL") && message.contains("big.bin was cut off"),
            "message:\n{}", r.describe()
        );
        assert_eq!(r.files(), [], "{}", r.describe());
        let omitted: Vec<&str> = r.get("/filesOmitted").as_array().map(|a| a.iter().filter_map(|o| o["path"].as_str()).collect()).unwrap_or_default();
        assert_eq!(omitted, ["big.bin", "."], "{}", r.describe());
        assert!(!out.join("big.bin").exists(), "a cut-off file must not reach outputDir:\n{}", r.describe());
        assert_none_left(&mark, Duration::from_secs(5), &r.describe());
    }
);

both!(
    /// Without an outputDir the result lists what the program wrote (names and sizes)
    /// without bringing the contents back: a file over the 64 MiB an outputDir could take is
    /// listed, not omitted.
    fn written_files_are_listed_without_their_contents(who) {
        let r = request(
            who,
            br#"{"language": "bash", "code": "head -c 70000000 /dev/zero > big.bin; echo hi > small.txt"}"#,
        );
        r.expect_ok();
        assert_eq!(
            r.files(),
            [("big.bin".to_string(), 70_000_000), ("small.txt".to_string(), 3)],
            "{}",
            r.describe()
        );
        let omitted = r.get("/filesOmitted");
        assert!(
            omitted.is_null() || omitted == &serde_json::json!([]),
            "nothing may be omitted:\n{}",
            r.describe()
        );
    }
);

both!(
    /// A name the program made that is not UTF-8 (a file's in a directory, a directory's) is
    /// omitted with its lossy `path` and, in `pathBase64`, the exact bytes of its path, so a
    /// client can tell which entry it was; nothing of it reaches outputDir. With an outputDir
    /// and without (a listing) alike.
    fn a_name_that_is_not_utf8_is_omitted_with_its_exact_bytes(who) {
        let code = r#"import os
os.makedirs("sub")
open(b"sub/bad\xffname", "w").write("x")
os.makedirs(b"dir\xfe")
open(b"dir\xfe/in.txt", "w").write("y")
open("ok.txt", "w").write("z")
"#;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        for with_dir in [true, false] {
            let mut req = json!({"language": "python", "code": code});
            if with_dir {
                req["outputDir"] = json!(out);
            }
            let r = request(who, req.to_string().as_bytes());
            r.expect_ok();
            assert_eq!(r.files(), [("ok.txt".to_string(), 1)], "{}", r.describe());
            let omitted = r.get("/filesOmitted");
            assert_eq!(
                omitted,
                &json!([
                    {"path": "dir\u{fffd}", "pathBase64": b64(b"dir\xfe"),
                     "reason": "directory name is not valid UTF-8 (nothing in it was collected)"},
                    {"path": "sub/bad\u{fffd}name", "pathBase64": b64(b"sub/bad\xffname"),
                     "reason": "name is not valid UTF-8"},
                ]),
                "{}",
                r.describe()
            );
        }
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.starts_with("dir")), "{names:?}");
        assert!(out.join("ok.txt").is_file() && !out.join("sub/bad\u{fffd}name").exists());
    }
);

both!(
    /// Directories the program made that hold no file collected (empty ones, one holding only
    /// a symlink) are listed in `directories`, at their deepest, and made in outputDir; one
    /// that came with the request's files is not listed for itself (as an unchanged input
    /// file is not), a new one inside it is. Without an outputDir they are listed alike, and
    /// they count toward config.collectFiles as files do.
    fn directories_the_program_made_are_kept(who) {
        let code = r#"import os
os.makedirs("emptydir/sub")
os.makedirs("data/new")
os.makedirs("res")
open("res/out.txt", "w").write("r")
os.makedirs("only_links")
os.symlink("/etc/passwd", "only_links/l")
"#;
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        let base = json!({
            "language": "python",
            "files": {"main.py": code, "data/in.csv": "a,b\n"},
            "entryPoint": "main.py",
        });
        let dirs = |r: &JsonRun| -> Vec<String> {
            r.get("/directories")
                .as_array()
                .unwrap_or_else(|| panic!("`directories` must be an array:\n{}", r.describe()))
                .iter()
                .map(|d| d.as_str().unwrap_or("?").to_string())
                .collect()
        };
        for with_dir in [true, false] {
            let mut req = base.clone();
            if with_dir {
                req["outputDir"] = json!(out);
            }
            let r = request(who, req.to_string().as_bytes());
            r.expect_ok();
            assert_eq!(r.files(), [("res/out.txt".to_string(), 1)], "{}", r.describe());
            assert_eq!(dirs(&r), ["data/new", "emptydir/sub", "only_links"], "{}", r.describe());
            assert_eq!(
                r.omitted(),
                [("only_links/l".to_string(), "symbolic link (not followed)".to_string())],
                "{}",
                r.describe()
            );
        }
        for dir in ["emptydir/sub", "data/new", "only_links"] {
            assert!(out.join(dir).is_dir(), "{dir} must be made in outputDir");
        }
        assert!(std::fs::read_dir(out.join("only_links")).unwrap().next().is_none(), "the symlink must not be copied");
        assert!(!out.join("data/in.csv").exists(), "the input file must not be copied back");
        assert_eq!(std::fs::read(out.join("res/out.txt")).unwrap(), b"r");

        // The cap: two entries, files and directories alike, in the order found.
        let mut req = base.clone();
        req["config"] = json!({"collectFiles": 2});
        let r = request(who, req.to_string().as_bytes());
        r.expect_ok();
        assert_eq!(dirs(&r), ["data/new", "emptydir/sub"], "{}", r.describe());
        assert_eq!(r.files(), [], "{}", r.describe());
        let reason = "over the 2-file cap (--collect-files / config.collectFiles raise it)".to_string();
        let omitted = r.omitted();
        for path in ["only_links", "res/out.txt"] {
            assert!(omitted.contains(&(path.to_string(), reason.clone())), "{path}:\n{}", r.describe());
        }
    }
);

// ---------------------------------------------------------------------------------------------
// Collection caps.

both!(
    /// A request's config.collectFiles and config.collectSize cap what comes back to its
    /// outputDir (the rest in filesOmitted, the message naming the request's fields), and
    /// config.collectFiles raises the cap of a listing past the default 1000.
    fn a_requests_collection_caps_apply(who) {
        let out_parent = writable_dir(who);
        let out = out_parent.path().join("out");
        let r = request(
            who,
            json!({
                "language": "bash",
                "code": "for i in 1 2 3 4; do echo $i > f$i.txt; done",
                "config": {"collectFiles": 2},
                "outputDir": out,
            })
            .to_string()
            .as_bytes(),
        );
        r.expect_ok();
        assert_eq!(r.files(), [("f1.txt".to_string(), 2), ("f2.txt".to_string(), 2)], "{}", r.describe());
        let reason = "over the 2-file cap (--collect-files / config.collectFiles raise it)".to_string();
        assert_eq!(
            r.omitted(),
            [("f3.txt".to_string(), reason.clone()), ("f4.txt".to_string(), reason)],
            "{}",
            r.describe()
        );
        assert!(out.join("f2.txt").exists() && !out.join("f3.txt").exists(), "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("config.collectFiles") && !msg.contains("--collect-files"), "{}", r.describe());

        let out2 = out_parent.path().join("out2");
        let r = request(
            who,
            json!({
                "language": "bash",
                "code": "head -c 600 /dev/zero > a.bin; head -c 600 /dev/zero > b.bin",
                "config": {"collectSize": 1000},
                "outputDir": out2,
            })
            .to_string()
            .as_bytes(),
        );
        r.expect_ok();
        assert_eq!(r.files(), [("a.bin".to_string(), 600)], "{}", r.describe());
        assert_eq!(
            r.omitted(),
            [("b.bin".to_string(), "over the 1000-byte total-size cap (--collect-size / config.collectSize raise it)".to_string())],
            "{}",
            r.describe()
        );
        assert!(!out2.join("b.bin").exists(), "{}", r.describe());

        // A listing (no outputDir) past 1000 files.
        let r = request(
            who,
            json!({
                "language": "bash",
                "code": "i=0; while [ $i -lt 1200 ]; do : > f$i; i=$((i+1)); done",
                "config": {"collectFiles": 1200},
            })
            .to_string()
            .as_bytes(),
        );
        r.expect_ok();
        assert_eq!(r.files().len(), 1200, "{}", r.describe());
        assert!(r.omitted().is_empty(), "{}", r.describe());
    }
);

both!(
    /// --collect-files and --collect-size next to --request are the requests' default and
    /// ceiling (a batch's workers get them too); on code from the command line, the file cap
    /// holds a listing (no --output-dir) and the size cap, which bounds contents, does not.
    fn operator_collection_caps_bound_requests_and_listings(who) {
        let writer = |config: Value| json!({"language": "bash", "code": "for i in 1 2 3; do echo $i > f$i.txt; done", "config": config});
        let with = |req: Value, flags: &[&str]| {
            cordon(who, "run")
                .args(flags)
                .arg("--request")
                .arg("-")
                .stdin(Input::Bytes(req.to_string().into_bytes()))
                .run_json()
        };
        let r = with(writer(json!({"collectFiles": 3})), &["--collect-files", "2"]);
        assert_eq!((r.code(), r.status()), (125, "sandbox_error"), "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or("");
        for part in ["config.collectFiles (3)", "--collect-files 2"] {
            assert!(msg.contains(part), "{part:?} in the message:\n{}", r.describe());
        }
        let r = with(writer(json!({})), &["--collect-files", "2"]);
        r.expect_ok();
        assert_eq!(r.files().len(), 2, "{}", r.describe());
        assert_eq!(r.omitted().len(), 1, "{}", r.describe());
        let r = with(writer(json!({"collectFiles": 1})), &["--collect-files", "2"]);
        assert_eq!(r.files().len(), 1, "within the ceiling, the request's:\n{}", r.describe());

        // A batch's workers.
        let dir = shared_tempdir();
        let file = dir.path().join("batch.jsonl");
        write_world_readable(&file, format!("{}\n", writer(json!({}))).as_bytes());
        let f = cordon(who, "run").args(["--collect-files=1", "--requests"]).arg(&file).run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let got: Value = serde_json::from_str(f.stdout_str().trim()).expect("one JSON line");
        assert_eq!(got["files"].as_array().map(Vec::len), Some(1), "{}", f.describe());

        // The command line's code, listed: 2 files, whatever their size.
        let r = cordon(who, "run")
            .args(["--lang", "bash", "--json", "--collect-files", "2", "--collect-size", "1", "-c"])
            .arg("for i in 1 2 3; do echo $i$i$i > f$i.txt; done")
            .run_json();
        r.expect_ok();
        assert_eq!(r.files(), [("f1.txt".to_string(), 4), ("f2.txt".to_string(), 4)], "{}", r.describe());
        assert_eq!(
            r.omitted(),
            [("f3.txt".to_string(), "over the 2-file cap (--collect-files / config.collectFiles raise it)".to_string())],
            "{}",
            r.describe()
        );
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("was listed") && msg.contains("--collect-files"), "{}", r.describe());

        // A profile's [limits] sets the language's default; a flag overrides it.
        let dir = shared_tempdir();
        let profile = dir.path().join("capped.toml");
        write_world_readable(
            &profile,
            b"name = \"bash-capped\"\ndescription = \"d\"\nsource = \"main.sh\"\nrun = [\"bash\", \"{source}\"]\n[limits]\ncollect_files = 1\n",
        );
        let code = "for i in 1 2 3; do echo $i > f$i.txt; done";
        let run = |extra: &[&str]| {
            cordon(who, "run")
                .arg("--profile")
                .arg(&profile)
                .args(["--lang", "bash-capped", "--rootfs", "host", "--json", "--no-history"])
                .args(extra)
                .args(["-c", code])
                .run_json()
        };
        let r = run(&[]);
        r.expect_ok();
        assert_eq!(r.files().len(), 1, "the profile's cap:
{}", r.describe());
        let r = run(&["--collect-files", "3"]);
        r.expect_ok();
        assert_eq!(r.files().len(), 3, "the flag's cap:
{}", r.describe());
    }
);

//! The compile phase of `cordon run` (go, rust), as root and as the unprivileged user: compile
//! errors, the compile cache, compile-phase limits, and compile-time reads of host files
//! (`include_str!`, `//go:embed`) that must not see anything the sandbox does not expose.

#[macro_use]
mod common;

use common::*;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------------
// Helpers (the user variant's HOME and XDG directories are set by tests/common).

/// Compiles are slow on a shared 2-core VM.
const COMPILE_DEADLINE: Duration = Duration::from_secs(400);

/// `cordon run …` as `who`. `setpriv` keeps root's environment (HOME=/root), so the
/// unprivileged user gets its own HOME and XDG directories: its compile cache lives there.
fn cordon_run(who: Who) -> Cordon {
    Cordon::new(who).arg("run").deadline(COMPILE_DEADLINE)
}

/// Writes `contents` into a fresh world-readable directory; returns (dir guard, file path).
fn host_file(name: &str, contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = shared_tempdir();
    let path = dir.path().join(name);
    write_world_readable(&path, contents.as_bytes());
    (dir, path)
}

/// A string no other run has used: makes a source unique, so its compile is never cached.
fn nonce(who: Who) -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{t}-{}-{who:?}", std::process::id())
}

/// `cordon run --lang LANG --json [opts] SOURCE`.
fn run_source(who: Who, lang: &str, file: &str, code: &str, opts: &[&str]) -> JsonRun {
    let (_dir, src) = host_file(file, code);
    let mut c = cordon_run(who).arg("--lang").arg(lang).arg("--json");
    for o in opts {
        c = c.arg(o);
    }
    c.arg(&src).run_json()
}

/// The distinctive lines of a host file the test process can read (None when it cannot: the
/// check is then only that the compile failed).
fn secret_lines(path: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| l.len() >= 12)
            .map(str::to_string)
            .collect(),
    )
}

/// Asserts that no line of the host file `path` appears anywhere in what cordon printed.
fn assert_not_leaked(r: &JsonRun, path: &str, extra: &[&str]) {
    let all = format!("{}\n{}", r.finished.stdout_str(), r.finished.stderr_str());
    let mut needles: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    match secret_lines(path) {
        Some(lines) => needles.extend(lines),
        None => println!(
            "note: {path} is not readable by the test process; only the compile failure is checked"
        ),
    }
    for n in &needles {
        assert!(
            !all.contains(n.as_str()),
            "content of host file {path} appeared in cordon's output ({n:?}):\n{}",
            r.describe()
        );
    }
}

/// The program never ran and the compile failed: status compile_error, exit 1, the compiler's
/// message in compile.error.
fn assert_compile_error(r: &JsonRun, compiler_says: &[&str]) {
    assert_eq!(r.status(), "compile_error", "{}", r.describe());
    assert_eq!(r.code(), 1, "a compile error exits 1:\n{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    assert_eq!(
        r.get("/compile/status"),
        &json!("compile_error"),
        "{}",
        r.describe()
    );
    assert_eq!(r.get("/compile/cached"), &json!(false), "{}", r.describe());
    let msg = r.get("/compile/error").as_str().unwrap_or("");
    for s in compiler_says {
        assert!(
            msg.contains(s),
            "compile.error must carry the compiler's message ({s:?}):\n{}",
            r.describe()
        );
    }
    assert!(
        !r.output().contains("RAN-MARKER"),
        "the program must not run after a failed compile:\n{}",
        r.describe()
    );
}

// ---------------------------------------------------------------------------------------------
// Compile errors.

const GO_BROKEN: &str = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"RAN-MARKER\")\n\tfmt.Println(nope)\n}\n";
const RUST_BROKEN: &str =
    "fn main() {\n    println!(\"RAN-MARKER\");\n    println!(\"{}\", nope);\n}\n";

fn compile_error(who: Who, lang: &str, file: &str, code: &str, says: &[&str]) {
    let r = run_source(who, lang, file, code, &[]);
    assert_compile_error(&r, says);
    assert_eq!(r.get("/language"), &json!(lang), "{}", r.describe());

    // Without --json: exit 1, the compiler's message on stderr, nothing on stdout.
    let (_dir, src) = host_file(file, code);
    let plain = cordon_run(who).arg("--lang").arg(lang).arg(&src).run();
    assert_eq!(plain.code, 1, "{}", plain.describe());
    for s in says {
        assert!(
            plain.stderr_str().contains(s),
            "the compiler's message must be on stderr ({s:?}):\n{}",
            plain.describe()
        );
    }
    assert!(
        !plain.stdout_str().contains("RAN-MARKER"),
        "{}",
        plain.describe()
    );
}

both!(fn go_compile_error(who) {
    if !toolchain_ready("go", "go_compile_error") {
        return;
    }
    compile_error(who, "go", "broken.go", GO_BROKEN, &["undefined: nope"]);
});

// Go builds the package in the entry's directory: a request split over several files (as
// agents write Go) compiles all of them. `go build main.go` built the entry alone:
// "undefined: hello".
both!(fn go_builds_every_file_of_the_entrys_package(who) {
    if !toolchain_ready("go", "go_builds_every_file_of_the_entrys_package") {
        return;
    }
    let n = nonce(who);
    for (entry, dir) in [("main.go", ""), ("cmd/app.go", "cmd/")] {
        let req = json!({
            "language": "go",
            "entryPoint": entry,
            "files": {
                entry: "package main\nfunc main() { hello() }\n",
                format!("{dir}util.go"): format!("package main\nimport \"fmt\"\nfunc hello() {{ fmt.Println(\"split {n}\") }}\n"),
                // Another package elsewhere is not built with it.
                "lib/other.go": "package other\n",
            },
        });
        let r = cordon_run(who)
            .arg("--request")
            .arg("-")
            .stdin(Input::Bytes(req.to_string().into_bytes()))
            .run_json();
        assert_eq!(r.expect_ok().trim(), format!("split {n}"), "{entry}:\n{}", r.describe());
    }
});

both!(fn rust_compile_error(who) {
    if !toolchain_ready("rust", "rust_compile_error") {
        return;
    }
    compile_error(who, "rust", "broken.rs", RUST_BROKEN, &["cannot find value `nope`"]);
});

// A compiler that cannot be started (not where the profile says) prints nothing: the result
// says why, not that its messages are in an empty `compile.error`.
both!(fn a_compiler_that_cannot_start_is_named(who) {
    let (dir, profile) = host_file(
        "cc-missing.toml",
        "name = \"cc-missing\"\ndescription = \"a compiler not installed\"\nsource = \"main.c\"\ncompile = [\"/opt/cordon-no-such/cc\", \"{source}\"]\nartifact = \"main\"\nrun = [\"./main\"]\n",
    );
    let r = cordon_run(who)
        .args(["--profile", profile.to_str().unwrap(), "--no-history", "--json", "-c", "int main(void) { return 0; }"])
        .run_json();
    assert_eq!((r.status(), r.code()), ("compile_error", 1), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(
        msg.starts_with("the compiler could not be started: command not found in the sandbox: /opt/cordon-no-such/cc"),
        "{}",
        r.describe()
    );
    assert_eq!(r.get("/compile/exitCode"), &json!(127), "{}", r.describe());
    drop(dir);
});

// `--stream` streams the compiler's output too, each piece inside `compile`, before the
// program's own pieces; they add up to the result's `compile.output` and `compile.error`.
// A cached compile streams nothing of it.
both!(fn a_compile_streams_its_output(who) {
    let (dir, profile) = host_file(
        "sh-built.toml",
        "name = \"sh-built\"\ndescription = \"a copy for a build\"\nsource = \"main.sh\"\ncompile = [\"sh\", \"-c\", \"echo building >&2; echo checked; cp main.sh main && chmod 755 main\"]\nartifact = \"main\"\nrun = [\"./main\"]\n",
    );
    let n = nonce(who);
    let code = format!("#!/bin/sh\necho ran {n}\n");
    let run = |extra: &[&str]| {
        cordon_run(who)
            .args(["--profile", profile.to_str().unwrap(), "--rootfs", "host", "--no-history", "--json", "--stream"])
            .args(extra)
            .args(["-c", &code])
            .run()
    };
    for (extra, cached) in [(&["--no-cache"][..], false), (&[], false), (&[], true)] {
        let f = run(extra);
        assert_eq!(f.code, 0, "{}", f.describe());
        let mut lines = f.json_lines();
        let result = lines.pop().unwrap();
        assert_eq!(result["compile"]["cached"], cached, "{}", f.describe());
        assert_eq!((result["compile"]["output"].as_str(), result["compile"]["error"].as_str()), (Some("checked\n"), Some("building\n")), "{}", f.describe());
        let want: Vec<serde_json::Value> = if cached {
            vec![json!({"stdout": format!("ran {n}\n")})]
        } else {
            let mut compile = vec![json!({"compile": {"stderr": "building\n"}}), json!({"compile": {"stdout": "checked\n"}})];
            // The two pipes are read as they become ready: either may come first.
            if lines.first() == Some(&compile[1]) {
                compile.swap(0, 1);
            }
            compile.push(json!({"stdout": format!("ran {n}\n")}));
            compile
        };
        assert_eq!(lines, want, "{}", f.describe());
    }
    // The compile's pieces are text whatever the output encoding (the result keeps them so);
    // the program's follow it.
    let f = run(&["--no-cache", "--output-encoding", "base64"]);
    let lines = f.json_lines();
    assert!(lines.contains(&json!({"compile": {"stderr": "building\n"}})), "{}", f.describe());
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("ran {n}\n"));
    assert!(lines.contains(&json!({"stdout": b64})), "{}", f.describe());
    // In a batch, a worker's compile pieces are passed on, tagged with the request's line.
    let batch = dir.path().join("batch.jsonl");
    write_world_readable(&batch, format!("{}\n", json!({"language": "sh-built", "code": code})).as_bytes());
    let f = cordon_run(who)
        .args(["--profile", profile.to_str().unwrap(), "--rootfs", "host", "--no-history", "--no-cache", "--unordered", "--stream", "--requests"])
        .arg(&batch)
        .run();
    assert_eq!(f.code, 0, "{}", f.describe());
    let lines = f.json_lines();
    assert!(lines.contains(&json!({"line": 1, "compile": {"stderr": "building\n"}})), "{}", f.describe());
    assert!(lines.contains(&json!({"line": 1, "stdout": format!("ran {n}\n")})), "{}", f.describe());
    assert_eq!((lines.len(), &lines[3]["compile"]["error"]), (4, &json!("building\n")), "{}", f.describe());
    drop(dir);
});

// A compile that succeeds with warnings: without --json they are on stderr (as `cargo run`
// shows them), before the program's own output; with --json in `compile.error`; the same
// again when the artifact comes from the cache.
both!(fn rust_warnings_are_shown(who) {
    if !toolchain_ready("rust", "rust_warnings_are_shown") {
        return;
    }
    let code = format!("fn main() {{ let unused_{} = 1; println!(\"ran\"); }}\n", nonce(who).replace('-', "_").to_lowercase());
    let (_dir, src) = host_file("warn.rs", &code);
    let f = cordon_run(who).arg("--lang").arg("rust").arg(&src).run();
    assert_eq!((f.code, f.stdout_str().as_str()), (0, "ran\n"), "{}", f.describe());
    assert!(f.stderr_str().contains("warning: unused variable"), "{}", f.describe());
    // The cached artifact brings the compile's warnings with it, as cargo replays them.
    let r = run_source(who, "rust", "warn.rs", &code, &[]);
    assert_eq!(r.get("/compile/cached"), &serde_json::json!(true), "{}", r.describe());
    assert!(r.get("/compile/error").as_str().unwrap_or("").contains("warning: unused variable"), "{}", r.describe());
    let f = cordon_run(who).arg("--lang").arg("rust").arg(&src).run();
    assert_eq!((f.code, f.stdout_str().as_str()), (0, "ran\n"), "{}", f.describe());
    assert!(f.stderr_str().contains("warning: unused variable"), "the cached run:\n{}", f.describe());
});

/// A Rust program of `n` non-inlined functions: rustc -O takes seconds for n in the
/// thousands (3,000: about 8 s on this VM), while a hello world compiles in a fraction of a
/// second. It prints `marker`, then a number.
fn slow_rust(marker: &str, n: usize) -> String {
    let mut src = String::new();
    for i in 0..n {
        src.push_str(&format!(
            "#[inline(never)]\nfn f{i}(x: u64) -> u64 {{\n    let mut s = x;\n    for k in 0..{} {{\n        s = s.wrapping_mul(6364136223846793005).wrapping_add(k + {i});\n    }}\n    s\n}}\n",
            i % 7 + 3
        ));
    }
    src.push_str(&format!(
        "fn main() {{\n    println!(\"{marker}\");\n    let mut t = 0u64;\n"
    ));
    for i in 0..n {
        src.push_str(&format!("    t = t.wrapping_add(f{i}(t));\n"));
    }
    src.push_str("    println!(\"{}\", t);\n}\n");
    src
}

/// The same for Go (go build is faster: 3,000 functions take about 2 s here).
fn slow_go(marker: &str, n: usize) -> String {
    let mut src = String::from("package main\n\nimport \"fmt\"\n\n");
    for i in 0..n {
        src.push_str(&format!(
            "//go:noinline\nfunc f{i}(x uint64) uint64 {{\n\ts := x\n\tfor k := uint64(0); k < {}; k++ {{\n\t\ts = s*6364136223846793005 + k + {i}\n\t}}\n\treturn s\n}}\n\n",
            i % 7 + 3
        ));
    }
    src.push_str(&format!(
        "func main() {{\n\tfmt.Println(\"{marker}\")\n\tt := uint64(0)\n"
    ));
    for i in 0..n {
        src.push_str(&format!("\tt += f{i}(t)\n"));
    }
    src.push_str("\tfmt.Println(t)\n}\n");
    src
}

// ---------------------------------------------------------------------------------------------
// The compile cache.

/// A first run of new code compiles (cached false); the second identical run is a cache hit
/// (cached true), prints the same, and is much faster; --no-cache compiles again.
fn compile_cache(who: Who, lang: &str, file: &str, code: &str) {
    let first = run_source(who, lang, file, code, &[]);
    first.expect_ok();
    assert_eq!(
        first.get("/compile/cached"),
        &json!(false),
        "new code cannot be in the cache:\n{}",
        first.describe()
    );

    let second = run_source(who, lang, file, code, &[]);
    assert_eq!(second.expect_ok(), first.output(), "{}", second.describe());
    assert_eq!(
        second.get("/compile/cached"),
        &json!(true),
        "the second run of the same code must hit the compile cache:\n{}",
        second.describe()
    );
    assert!(
        second.elapsed() * 2 < first.elapsed(),
        "a cached run ({:?}) must be much faster than the first ({:?}):\n{}",
        second.elapsed(),
        first.elapsed(),
        second.describe()
    );

    let third = run_source(who, lang, file, code, &["--no-cache"]);
    assert_eq!(third.expect_ok(), first.output(), "{}", third.describe());
    assert_eq!(
        third.get("/compile/cached"),
        &json!(false),
        "--no-cache must compile:\n{}",
        third.describe()
    );
}

both!(fn go_compile_cache_hit(who) {
    if !toolchain_ready("go", "go_compile_cache_hit") {
        return;
    }
    // Big enough that the compile (seconds) dominates the run (a fraction of a second).
    let code = slow_go(&format!("cache {}", nonce(who)), 8000);
    compile_cache(who, "go", "cache.go", &code);
});

both!(fn rust_compile_cache_hit(who) {
    if !toolchain_ready("rust", "rust_compile_cache_hit") {
        return;
    }
    // Big enough that the compile (seconds) dominates the run (a fraction of a second).
    let code = slow_rust(&format!("cache {}", nonce(who)), 1000);
    compile_cache(who, "rust", "cache.rs", &code);
});

both!(
/// The compile report's figures say where they came from, as the result's do: under the
/// rlimit backend the compiler's memory is one process's (rusage), not the sandbox's total;
/// under the default backend the compile is measured as the run is. A cached compile measured
/// nothing: its figures are null and their sources `unavailable`.
fn compile_metrics_name_their_source(who) {
    if !toolchain_ready("rust", "compile_metrics_name_their_source") {
        return;
    }
    let code = format!("fn main() {{ println!(\"{}\"); }}\n", nonce(who));
    let r = run_source(who, "rust", "m.rs", &code, &["--limits-backend", "rlimit"]);
    r.expect_ok();
    assert_eq!(r.get("/compile/cached"), &json!(false), "{}", r.describe());
    assert!(r.get("/compile/cpuTime").is_number(), "{}", r.describe());
    assert_eq!(r.get("/compile/cpuTimeSource"), &json!("rusage"), "{}", r.describe());
    assert!(r.get("/compile/memoryUsed").is_number(), "{}", r.describe());
    let memory = r.get("/compile/memoryUsedSource");
    assert!(memory == &json!("rusage") || memory == &json!("polled"), "{}", r.describe());

    let r = run_source(who, "rust", "m.rs", &code, &["--no-cache"]);
    r.expect_ok();
    assert_eq!(r.get("/compile/cpuTimeSource"), r.get("/cpuTimeSource"), "{}", r.describe());
    let memory = r.get("/compile/memoryUsedSource");
    assert!(memory.is_string() && memory != &json!("unavailable"), "{}", r.describe());

    let r = run_source(who, "rust", "m.rs", &code, &[]);
    r.expect_ok();
    assert_eq!(r.get("/compile/cached"), &json!(true), "{}", r.describe());
    for (figure, source) in [("cpuTime", "cpuTimeSource"), ("memoryUsed", "memoryUsedSource")] {
        assert_eq!(r.get(&format!("/compile/{figure}")), &json!(null), "{}", r.describe());
        assert_eq!(r.get(&format!("/compile/{source}")), &json!("unavailable"), "{}", r.describe());
    }
});

// ---------------------------------------------------------------------------------------------
// Compile-phase limits.

both!(
/// --compile-timeout kills a compile that takes too long: status timeout, exit 124, nothing
/// ran, and a later run with the default compile limit is not poisoned by it (not cached).
fn rust_compile_timeout(who) {
    if !toolchain_ready("rust", "rust_compile_timeout") {
        return;
    }
    let marker = format!("RAN-MARKER {}", nonce(who));
    let code = slow_rust(&marker, 3000);
    let r = run_source(who, "rust", "slow.rs", &code, &["--compile-timeout", "1s"]);
    assert_eq!(r.status(), "timeout", "{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_eq!(r.get("/compile/status"), &json!("timeout"), "{}", r.describe());
    assert!(!r.output().contains("RAN-MARKER"), "{}", r.describe());

    let ok = run_source(who, "rust", "slow.rs", &code, &[]);
    assert!(
        ok.expect_ok().starts_with(&format!("{marker}\n")),
        "{}",
        ok.describe()
    );
    assert_eq!(ok.get("/compile/cached"), &json!(false), "a killed compile must not be cached:\n{}", ok.describe());
});

// ---------------------------------------------------------------------------------------------
// Compile-time reads of host files.

both!(
/// `include_str!` reads any path at compile time. Control: a file the sandbox exposes
/// (/usr/lib/os-release under the host rootfs) is read, so the primitive works inside the
/// compile sandbox; then host files it must not expose fail to compile and never leak.
fn rust_include_str_cannot_read_host_files(who) {
    if !toolchain_ready("rust", "rust_include_str_cannot_read_host_files") {
        return;
    }
    let control = "/usr/lib/os-release";
    let want = std::fs::read_to_string(control).expect("read /usr/lib/os-release");
    let r = run_source(
        who,
        "rust",
        "inc.rs",
        &format!("fn main() {{\n    print!(\"{{}}\", include_str!({control:?}));\n}}\n"),
        &[],
    );
    assert_eq!(
        r.expect_ok(),
        want,
        "control: include_str! of a file the sandbox exposes must work, or the checks below prove nothing:\n{}",
        r.describe()
    );

    // A host file the caller itself can read, in the host's /tmp (the sandbox has its own).
    let marker = format!("cordon-host-secret-{}", nonce(who));
    let (_dir, secret) = host_file("secret.txt", &marker);
    let secret = secret.to_str().unwrap().to_string();

    for path in ["/etc/shadow", "/root/.bashrc", secret.as_str()] {
        let code = format!(
            "fn main() {{\n    println!(\"RAN-MARKER\");\n    print!(\"{{}}\", include_str!({path:?}));\n}}\n"
        );
        let r = run_source(who, "rust", "inc.rs", &code, &[]);
        assert_compile_error(&r, &["couldn't read"]);
        assert_not_leaked(&r, path, &[&marker]);
    }
});

const GO_EMBED: &str = "package main\n\nimport (\n\t_ \"embed\"\n\t\"fmt\"\n)\n\n//go:embed PATTERN\nvar s string\n\nfunc main() {\n\tfmt.Println(\"RAN-MARKER\")\n\tfmt.Print(s)\n}\n";

both!(
/// `//go:embed`: control, a file in the package dir (given with --file) is embedded; patterns
/// that name host files outside the package fail to compile and leak nothing; and the go env
/// file trick (HOME is /workspace in the compile sandbox, so a request can ship
/// .config/go/env with GOFLAGS=-overlay=… mapping an embedded name onto a host path) does not
/// reach a host file either.
fn go_embed_cannot_read_host_files(who) {
    if !toolchain_ready("go", "go_embed_cannot_read_host_files") {
        return;
    }
    let (_d, data) = host_file("data.txt", "embedded data\n");
    let file_arg = format!("data.txt={}", data.display());
    let r = run_source(who, "go", "embed.go", &GO_EMBED.replace("PATTERN", "data.txt"), &["--file", &file_arg]);
    assert_eq!(
        r.expect_ok(),
        "RAN-MARKER\nembedded data\n",
        "control: //go:embed of a file in the package must work:\n{}",
        r.describe()
    );

    for (pattern, path) in [
        ("/etc/shadow", "/etc/shadow"),
        ("../../../../etc/shadow", "/etc/shadow"),
        ("/root/.bashrc", "/root/.bashrc"),
    ] {
        let r = run_source(who, "go", "embed.go", &GO_EMBED.replace("PATTERN", pattern), &[]);
        assert_compile_error(&r, &[pattern]);
        assert_not_leaked(&r, path, &[]);
    }

    // The overlay trick, through the go env file in $HOME of the compile.
    for path in ["/etc/shadow", "/root/.bashrc"] {
        let (_o, overlay) = host_file("o.json", &format!("{{\"Replace\":{{\"/workspace/secret.txt\":{path:?}}}}}"));
        let (_e, goenv) = host_file("env", "GOFLAGS=-overlay=/workspace/o.json\n");
        let r = run_source(
            who,
            "go",
            "embed.go",
            &GO_EMBED.replace("PATTERN", "secret.txt"),
            &[
                "--file",
                &format!("o.json={}", overlay.display()),
                "--file",
                &format!(".config/go/env={}", goenv.display()),
            ],
        );
        assert_compile_error(&r, &[]);
        assert_not_leaked(&r, path, &[]);
    }
});

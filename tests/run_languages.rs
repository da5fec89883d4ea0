//! `cordon run --lang LANG` for each language (python, node, go, rust, bash), as root and as the
//! unprivileged user: hello world, args and stdin, a runtime error, timeout, memory limit, an
//! input file read, and output files collected (symlinks and FIFOs omitted, never followed).
//!
//! Every language runs one "scenario program" (`PROGRAM`), dispatched on its first argument, so
//! that a compiled language compiles the same source in every test (one compile per user once
//! the compile cache works).

#[macro_use]
mod common;

use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Helpers (the user variant's HOME and XDG directories are set by tests/common).

/// `cordon run …` as `who`. `setpriv` keeps root's environment (HOME=/root), so the
/// unprivileged user gets its own HOME and XDG directories: its compile cache and history live
/// there.
fn cordon_run(who: Who) -> Cordon {
    Cordon::new(who).arg("run")
}

/// A directory `who` can write (an `--output-dir` parent).
fn writable_dir(who: Who) -> tempfile::TempDir {
    let dir = shared_tempdir();
    std::os::unix::fs::chown(dir.path(), Some(who.caller_uid()), Some(who.caller_gid()))
        .expect("chown the output dir to the caller");
    dir
}

/// Writes `code` into a fresh world-readable directory; returns (dir guard, file path).
fn source_file(name: &str, code: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = shared_tempdir();
    let path = dir.path().join(name);
    write_world_readable(&path, code.as_bytes());
    (dir, path)
}

// ---------------------------------------------------------------------------------------------
// The languages.

struct Lang {
    /// `--lang`
    name: &'static str,
    /// Prints exactly "hello world\n".
    hello: &'static str,
    /// The scenario program (see the module doc); written to `file`.
    program: &'static str,
    file: &'static str,
    compiled: bool,
    /// `fail` scenario: the program's exit code and a text its stderr must contain.
    fail_code: i64,
    fail_text: &'static [&'static str],
}

impl Lang {
    /// How long one cordon invocation may take (compiles are slow on a shared 2-core VM).
    fn deadline(&self) -> Duration {
        if self.compiled {
            Duration::from_secs(400)
        } else {
            Duration::from_secs(90)
        }
    }

    /// `cordon run --lang NAME [opts] PROGRAM -- SCENARIO [args]`; keeps the source dir alive.
    fn scenario(&self, who: Who, opts: &[&str], args: &[&str]) -> (Cordon, tempfile::TempDir) {
        let (dir, path) = source_file(self.file, self.program);
        let mut c = cordon_run(who)
            .arg("--lang")
            .arg(self.name)
            .deadline(self.deadline());
        for o in opts {
            c = c.arg(o);
        }
        c = c.arg(&path).arg("--");
        for a in args {
            c = c.arg(a);
        }
        (c, dir)
    }
}

const PYTHON: Lang = Lang {
    name: "python",
    hello: "print(\"hello world\")\n",
    file: "prog.py",
    compiled: false,
    fail_code: 1,
    fail_text: &[
        "Traceback (most recent call last)",
        "ValueError: boom-marker",
    ],
    program: r#"import os, sys, time

cmd = sys.argv[1]
if cmd == "args":
    for a in sys.argv[2:]:
        print("[" + a + "]")
    sys.stdout.write("stdin:" + sys.stdin.read())
elif cmd == "fail":
    raise ValueError("boom-marker")
elif cmd == "sleep":
    print("started", flush=True)
    time.sleep(1000)
elif cmd == "mem":
    hog = []
    for _ in range(512):
        hog.append(b"x" * (1 << 20))
    print("survived")
elif cmd == "read":
    rows = [l.split(",") for l in open("data.csv").read().splitlines() if l]
    print("rows=%d sum=%d" % (len(rows), sum(int(r[1]) for r in rows)))
elif cmd == "write":
    os.mkdir("sub")
    open("out.bin", "wb").write(bytes([0, 1, 2, 254, 255, 10]))
    open("sub/nested.txt", "w").write("nested\n")
    os.symlink("/etc/passwd", "link")
    os.mkfifo("fifo")
    print("wrote")
else:
    sys.exit("unknown scenario " + cmd)
"#,
};

const NODE: Lang = Lang {
    name: "node",
    hello: "console.log(\"hello world\");\n",
    file: "prog.js",
    compiled: false,
    fail_code: 1,
    fail_text: &["Error: boom-marker"],
    program: r#"const fs = require("fs");
const cmd = process.argv[2];
if (cmd === "args") {
  for (const a of process.argv.slice(3)) console.log("[" + a + "]");
  process.stdout.write("stdin:" + fs.readFileSync(0, "utf8"));
} else if (cmd === "fail") {
  throw new Error("boom-marker");
} else if (cmd === "sleep") {
  console.log("started");
  setTimeout(() => {}, 1000000);
} else if (cmd === "mem") {
  const hog = [];
  for (let i = 0; i < 512; i++) hog.push(Buffer.alloc(1 << 20, 1));
  console.log("survived");
} else if (cmd === "read") {
  const rows = fs.readFileSync("data.csv", "utf8").split("\n").filter((l) => l).map((l) => l.split(","));
  console.log(`rows=${rows.length} sum=${rows.reduce((s, r) => s + Number(r[1]), 0)}`);
} else if (cmd === "write") {
  fs.mkdirSync("sub");
  fs.writeFileSync("out.bin", Buffer.from([0, 1, 2, 254, 255, 10]));
  fs.writeFileSync("sub/nested.txt", "nested\n");
  fs.symlinkSync("/etc/passwd", "link");
  require("child_process").execFileSync("mkfifo", ["fifo"]);
  console.log("wrote");
} else {
  console.error("unknown scenario " + cmd);
  process.exit(99);
}
"#,
};

const GO: Lang = Lang {
    name: "go",
    hello: "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello world\") }\n",
    file: "prog.go",
    compiled: true,
    fail_code: 2,
    fail_text: &["panic: boom-marker"],
    program: r#"package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	switch os.Args[1] {
	case "args":
		for _, a := range os.Args[2:] {
			fmt.Printf("[%s]\n", a)
		}
		in, err := io.ReadAll(os.Stdin)
		must(err)
		fmt.Print("stdin:" + string(in))
	case "fail":
		panic("boom-marker")
	case "sleep":
		fmt.Println("started")
		time.Sleep(1000 * time.Second)
	case "mem":
		var hog [][]byte
		for i := 0; i < 512; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = 1
			}
			hog = append(hog, b)
		}
		fmt.Println("survived", len(hog))
	case "read":
		data, err := os.ReadFile("data.csv")
		must(err)
		rows, sum := 0, 0
		for _, l := range strings.Split(string(data), "\n") {
			if l == "" {
				continue
			}
			n, err := strconv.Atoi(strings.Split(l, ",")[1])
			must(err)
			rows++
			sum += n
		}
		fmt.Printf("rows=%d sum=%d\n", rows, sum)
	case "write":
		must(os.Mkdir("sub", 0o755))
		must(os.WriteFile("out.bin", []byte{0, 1, 2, 254, 255, 10}, 0o644))
		must(os.WriteFile("sub/nested.txt", []byte("nested\n"), 0o644))
		must(os.Symlink("/etc/passwd", "link"))
		must(syscall.Mkfifo("fifo", 0o644))
		fmt.Println("wrote")
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario", os.Args[1])
		os.Exit(99)
	}
}
"#,
};

const RUST: Lang = Lang {
    name: "rust",
    hello: "fn main() {\n    println!(\"hello world\");\n}\n",
    file: "prog.rs",
    compiled: true,
    fail_code: 101,
    fail_text: &["panicked", "boom-marker"],
    // rustc 1.63 (Debian): no std::hint::black_box; the fill byte comes from argv so that -O
    // cannot fold the allocations away.
    program: r#"use std::io::Read;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args[1].as_str() {
        "args" => {
            for a in &args[2..] {
                println!("[{}]", a);
            }
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).unwrap();
            print!("stdin:{}", s);
        }
        "fail" => panic!("boom-marker"),
        "sleep" => {
            println!("started");
            std::thread::sleep(std::time::Duration::from_secs(1000));
        }
        "mem" => {
            let fill = args.len() as u8;
            let mut hog: Vec<Vec<u8>> = Vec::new();
            for _ in 0..512 {
                hog.push(vec![fill; 1 << 20]);
            }
            let total: u64 = hog.iter().enumerate().map(|(i, v)| v[i * 997 % v.len()] as u64).sum();
            println!("survived {}", total);
        }
        "read" => {
            let data = std::fs::read_to_string("data.csv").unwrap();
            let (mut rows, mut sum) = (0, 0i64);
            for l in data.lines().filter(|l| !l.is_empty()) {
                rows += 1;
                sum += l.split(',').nth(1).unwrap().parse::<i64>().unwrap();
            }
            println!("rows={} sum={}", rows, sum);
        }
        "write" => {
            std::fs::create_dir("sub").unwrap();
            std::fs::write("out.bin", [0u8, 1, 2, 254, 255, 10]).unwrap();
            std::fs::write("sub/nested.txt", "nested\n").unwrap();
            std::os::unix::fs::symlink("/etc/passwd", "link").unwrap();
            let st = std::process::Command::new("mkfifo").arg("fifo").status().unwrap();
            assert!(st.success(), "mkfifo failed");
            println!("wrote");
        }
        other => {
            eprintln!("unknown scenario {}", other);
            std::process::exit(99);
        }
    }
}
"#,
};

const BASH: Lang = Lang {
    name: "bash",
    hello: "echo \"hello world\"\n",
    file: "prog.sh",
    compiled: false,
    fail_code: 3,
    fail_text: &["boom-marker"],
    program: r#"set -e
case "$1" in
args)
  shift
  for a in "$@"; do printf '[%s]\n' "$a"; done
  in=$(cat; echo x)
  printf 'stdin:%s' "${in%x}"
  ;;
fail)
  echo "boom-marker" >&2
  exit 3
  ;;
sleep)
  echo started
  sleep 1000
  ;;
mem)
  s=xxxxxxxxxxxxxxxx
  while [ ${#s} -lt 536870912 ]; do s="$s$s"; done
  echo survived
  ;;
read)
  rows=0; sum=0
  while IFS=, read -r name n; do
    [ -n "$name" ] || continue
    rows=$((rows + 1)); sum=$((sum + n))
  done < data.csv
  echo "rows=$rows sum=$sum"
  ;;
write)
  mkdir sub
  printf '\000\001\002\376\377\n' > out.bin
  printf 'nested\n' > sub/nested.txt
  ln -s /etc/passwd link
  mkfifo fifo
  echo wrote
  ;;
*)
  echo "unknown scenario $1" >&2
  exit 99
  ;;
esac
"#,
};

// ---------------------------------------------------------------------------------------------
// The tests, one body per scenario, instantiated for every language below.

/// Hello world, from `-c CODE`: exact output passed through (exit 0), and the same in --json.
fn hello(who: Who, lang: &Lang) {
    let plain = cordon_run(who)
        .arg("--lang")
        .arg(lang.name)
        .arg("-c")
        .arg(lang.hello)
        .deadline(lang.deadline())
        .run();
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert_eq!(
        plain.stdout_str(),
        "hello world\n",
        "the program's stdout must pass through unchanged:\n{}",
        plain.describe()
    );

    let r = cordon_run(who)
        .arg("--lang")
        .arg(lang.name)
        .arg("--json")
        .arg("-c")
        .arg(lang.hello)
        .deadline(lang.deadline())
        .run_json();
    assert_eq!(r.expect_ok(), "hello world\n", "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(true), "{}", r.describe());
    assert_eq!(r.get("/exitCode"), &json!(0), "{}", r.describe());
    assert_eq!(r.get("/language"), &json!(lang.name), "{}", r.describe());
    assert_eq!(r.error(), "", "nothing on stderr:\n{}", r.describe());
    if lang.compiled {
        assert_eq!(r.get("/compile/status"), &json!("ok"), "{}", r.describe());
        assert!(
            r.get("/compile/cached").is_boolean(),
            "compile.cached must be a boolean:\n{}",
            r.describe()
        );
    } else {
        assert_eq!(
            r.get("/compile"),
            &Value::Null,
            "an interpreted language has no compile phase:\n{}",
            r.describe()
        );
    }
}

/// Arguments after `--` reach the program verbatim (spaces, UTF-8), and `.stdin` feeds it.
fn args_and_stdin(who: Who, lang: &Lang) {
    let (c, _dir) = lang.scenario(who, &["--json"], &["args", "one", "two words", "ünï", "-x"]);
    let r = c.stdin(Input::Bytes(b"line1\nline2\n".to_vec())).run_json();
    assert_eq!(
        r.expect_ok(),
        "[one]\n[two words]\n[ünï]\n[-x]\nstdin:line1\nline2\n",
        "{}",
        r.describe()
    );

    // --stdin FILE instead of cordon's own stdin.
    let (data_dir, stdin_file) = source_file("input.txt", "from a file\n");
    let (c, _dir) = lang.scenario(
        who,
        &["--json", "--stdin", stdin_file.to_str().unwrap()],
        &["args"],
    );
    let r = c.run_json();
    assert_eq!(r.expect_ok(), "stdin:from a file\n", "{}", r.describe());
    drop(data_dir);
}

/// An uncaught error: status runtime_error, the program's exit code (in --json and as cordon's
/// own exit code), its message on stderr.
fn runtime_error(who: Who, lang: &Lang) {
    let (c, _dir) = lang.scenario(who, &["--json"], &["fail"]);
    let r = c.run_json();
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    assert_eq!(
        r.get("/exitCode"),
        &json!(lang.fail_code),
        "{}",
        r.describe()
    );
    assert_eq!(i64::from(r.code()), lang.fail_code, "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    for text in lang.fail_text {
        assert!(
            r.error().contains(text),
            "stderr (`error`) must contain {text:?}:\n{}",
            r.describe()
        );
    }

    let (c, _dir) = lang.scenario(who, &[], &["fail"]);
    let plain = c.run();
    assert_eq!(
        i64::from(plain.code),
        lang.fail_code,
        "without --json cordon exits with the program's code:\n{}",
        plain.describe()
    );
    assert!(
        plain.stderr_str().contains("boom-marker"),
        "the program's stderr must pass through:\n{}",
        plain.describe()
    );
}

/// A program that sleeps forever is killed at --timeout: status timeout, exit 124, and what it
/// printed before is kept.
fn timeout(who: Who, lang: &Lang) {
    let (c, _dir) = lang.scenario(who, &["--json", "--timeout", "2s"], &["sleep"]);
    let r = c.run_json();
    assert_eq!(r.status(), "timeout", "{}", r.describe());
    assert_eq!(r.code(), 124, "{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
    assert!(
        r.output().contains("started"),
        "output printed before the timeout must be kept:\n{}",
        r.describe()
    );
    let ms = r.get("/executionTime").as_f64().unwrap_or(f64::NAN);
    assert!(
        (1_500.0..30_000.0).contains(&ms),
        "executionTime of a 2 s timeout must be about 2 s (generous bounds 1.5-30 s), got {ms}:\n{}",
        r.describe()
    );
}

/// A program that allocates (and touches) 512 MiB under --memory 64M is stopped: status
/// memory_limit, exit 137, whatever the limits backend (cgroup for root, rlimit for the user
/// on this host).
fn memory_limit(who: Who, lang: &Lang) {
    let (c, _dir) = lang.scenario(who, &["--json", "--memory", "64M"], &["mem"]);
    let r = c.run_json();
    let backend = r.get("/limits/backend").clone();
    assert!(
        !r.output().contains("survived"),
        "the program allocated 512 MiB under a 64 MiB limit (backend {backend}):\n{}",
        r.describe()
    );
    assert_eq!(
        r.status(),
        "memory_limit",
        "backend {backend}:\n{}",
        r.describe()
    );
    assert_eq!(r.code(), 137, "backend {backend}:\n{}", r.describe());
    assert_eq!(r.get("/success"), &json!(false), "{}", r.describe());
}

/// `--file data.csv=PATH` copies a host file into /workspace; the program reads it; an input
/// the program did not change is not listed in `files`.
fn input_file(who: Who, lang: &Lang) {
    let (data_dir, csv) = source_file("host-data.csv", "a,1\nb,2\nc,39\n");
    let arg = format!("data.csv={}", csv.display());
    let (c, _dir) = lang.scenario(who, &["--json", "--file", &arg], &["read"]);
    let r = c.run_json();
    assert_eq!(r.expect_ok(), "rows=3 sum=42\n", "{}", r.describe());
    assert_eq!(
        r.get("/files"),
        &json!([]),
        "unchanged input files (and the source) are not listed as output:\n{}",
        r.describe()
    );
    drop(data_dir);
}

/// The program writes out.bin, sub/nested.txt, a symlink to /etc/passwd and a FIFO; with
/// --output-dir the regular files arrive with the right bytes, the symlink and the FIFO are
/// listed in filesOmitted and not created, and nothing hangs on the FIFO.
fn output_files(who: Who, lang: &Lang) {
    let out_parent = writable_dir(who);
    let out = out_parent.path().join("out");
    let (c, _dir) = lang.scenario(
        who,
        &["--json", "--output-dir", out.to_str().unwrap()],
        &["write"],
    );
    let r = c.run_json();
    assert_eq!(r.expect_ok(), "wrote\n", "{}", r.describe());

    // The result lists exactly the two regular files (not the source, not the artifact).
    let listed = r.files();
    assert_eq!(
        listed,
        vec![
            ("out.bin".to_string(), 6),
            ("sub/nested.txt".to_string(), 7)
        ],
        "files:\n{}",
        r.describe()
    );

    // The symlink and the FIFO are omitted, with a reason.
    let omitted: Vec<String> = r
        .get("/filesOmitted")
        .as_array()
        .unwrap_or_else(|| panic!("`filesOmitted` must be an array:\n{}", r.describe()))
        .iter()
        .map(|f| {
            assert!(
                f["reason"].as_str().is_some_and(|s| !s.is_empty()),
                "each omitted file needs a reason:\n{}",
                r.describe()
            );
            f["path"].as_str().unwrap_or("?").to_string()
        })
        .collect();
    for name in ["link", "fifo"] {
        assert!(
            omitted.iter().any(|p| p == name),
            "{name} must be listed in filesOmitted:\n{}",
            r.describe()
        );
    }

    // On the host: the right bytes; no symlink, no FIFO.
    assert_eq!(
        std::fs::read(out.join("out.bin")).ok(),
        Some(vec![0u8, 1, 2, 254, 255, 10]),
        "out.bin on the host:\n{}",
        r.describe()
    );
    assert_eq!(
        std::fs::read(out.join("sub/nested.txt")).ok(),
        Some(b"nested\n".to_vec()),
        "sub/nested.txt on the host:\n{}",
        r.describe()
    );
    for name in ["link", "fifo"] {
        assert!(
            std::fs::symlink_metadata(out.join(name)).is_err(),
            "{name} must not be created in the output dir:\n{}",
            r.describe()
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("read the output dir")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["out.bin", "sub"],
        "the output dir holds only what the program wrote:\n{}",
        r.describe()
    );
    assert_owned_by(&out.join("out.bin"), who);
}

/// Files cordon writes into --output-dir belong to the caller, never to root for the user.
fn assert_owned_by(path: &Path, who: Who) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).expect("stat output file");
    assert_eq!(
        meta.uid(),
        who.caller_uid(),
        "{} must be owned by the caller",
        path.display()
    );
    assert_eq!(
        meta.mode() & 0o6000,
        0,
        "{} must not be setuid/setgid",
        path.display()
    );
}

macro_rules! language_tests {
    ($module:ident, $lang:expr) => {
        mod $module {
            use super::*;
            both!(fn hello_world(who) { if toolchain_ready($lang.name, stringify!(hello_world)) { super::hello(who, &$lang) } });
            both!(fn args_and_stdin(who) { if toolchain_ready($lang.name, stringify!(args_and_stdin)) { super::args_and_stdin(who, &$lang) } });
            both!(fn runtime_error(who) { if toolchain_ready($lang.name, stringify!(runtime_error)) { super::runtime_error(who, &$lang) } });
            both!(fn timeout(who) { if toolchain_ready($lang.name, stringify!(timeout)) { super::timeout(who, &$lang) } });
            both!(fn memory_limit(who) { if toolchain_ready($lang.name, stringify!(memory_limit)) { super::memory_limit(who, &$lang) } });
            both!(fn input_file(who) { if toolchain_ready($lang.name, stringify!(input_file)) { super::input_file(who, &$lang) } });
            both!(fn output_files(who) { if toolchain_ready($lang.name, stringify!(output_files)) { super::output_files(who, &$lang) } });
        }
    };
}

language_tests!(python, PYTHON);
language_tests!(node, NODE);
language_tests!(go, GO);
language_tests!(rust, RUST);
language_tests!(bash, BASH);

// ---------------------------------------------------------------------------------------------
// Forms of the command line that are not per-language.

both!(fn aliases_py_and_js(who) {
    for (alias, code) in [("py", "print('alias ok')"), ("js", "console.log('alias ok')")] {
        let r = cordon_run(who).arg("--lang").arg(alias).arg("--json").arg("-c").arg(code).run_json();
        assert_eq!(r.expect_ok(), "alias ok\n", "--lang {alias}:\n{}", r.describe());
    }
});

both!(fn code_from_stdin(who) {
    // FILE `-`: the code comes from stdin, and the program's stdin is then empty.
    let r = cordon_run(who)
        .arg("--lang")
        .arg("python")
        .arg("--json")
        .arg("-")
        .stdin(Input::Bytes(b"import sys\nprint('code from stdin', repr(sys.stdin.read()))\n".to_vec()))
        .run_json();
    assert_eq!(r.expect_ok(), "code from stdin ''\n", "{}", r.describe());

    // ... unless --stdin names a file.
    let (dir, input) = source_file("in.txt", "fed\n");
    let r = cordon_run(who)
        .arg("--lang")
        .arg("python")
        .arg("--json")
        .arg("--stdin")
        .arg(&input)
        .arg("-")
        .stdin(Input::Bytes(b"import sys\nprint(repr(sys.stdin.read()))\n".to_vec()))
        .run_json();
    assert_eq!(r.expect_ok(), "'fed\\n'\n", "{}", r.describe());
    drop(dir);
});

// `cordon run chart.py`: the program runs under the name it was given (argv[0], its
// tracebacks, node's module type from `.mjs`), not the profile's default `main.py`; a
// --file of the same name is refused, saying which clash it is.
both!(fn a_code_file_keeps_its_name(who) {
    let (dir, path) = source_file("chart.py", "import sys\nprint(sys.argv[0])\nraise ValueError('x')\n");
    let r = cordon_run(who).arg("--lang").arg("python").arg("--json").arg(&path).run_json();
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    assert_eq!(r.output(), "chart.py\n", "{}", r.describe());
    assert!(r.error().contains("File \"/workspace/chart.py\", line 3"), "{}", r.describe());
    let (_d2, other) = source_file("chart.py", "x = 1\n");
    let f = cordon_run(who)
        .arg("--lang")
        .arg("python")
        .arg("--file")
        .arg(format!("chart.py={}", other.display()))
        .arg(&path)
        .run();
    assert!(f.code == 125 && f.stderr_str().contains("`chart.py` is given twice: it is the code to run"), "{}", f.describe());
    // A file whose name cannot be an entry point (starts with `-`) runs as main.py.
    let dash = dir.path().join("-x.py");
    write_world_readable(&dash, b"import sys\nprint(sys.argv[0])\n");
    let r = cordon_run(who).arg("--lang").arg("python").arg("--json").arg(&dash).run_json();
    assert_eq!(r.expect_ok(), "main.py\n", "{}", r.describe());
    if toolchain_ready("node", "a_code_file_keeps_its_name") {
        let (_d3, mjs) = source_file("mod.mjs", "import { basename } from 'node:path';\nconsole.log(basename(import.meta.url));\n");
        let r = cordon_run(who).arg("--lang").arg("node").arg("--json").arg(&mjs).run_json();
        assert_eq!(r.expect_ok(), "mod.mjs\n", "{}", r.describe());
    }
    drop(dir);
});

// A program that fails on a module the root filesystem lacks is told where it can come from:
// first the program's own module (a file not sent: a same-named package on the registry may
// be anyone's), then the package to give --packages (PyPI's name where it is another), and
// for node the same.
both!(fn a_missing_module_is_met_with_how_to_install_it(who) {
    let r = cordon_run(who).args(["--lang", "python", "--json", "-c", "import cordon_no_such_mod.sub"]).run_json();
    assert_eq!((r.status(), r.code()), ("runtime_error", 1), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(msg.contains("failed to import `cordon_no_such_mod`") && msg.contains("--packages cordon_no_such_mod"), "{}", r.describe());
    let own = msg.find("send it with --file cordon_no_such_mod.py=PATH");
    assert!(own.is_some() && own < msg.find("--packages"), "the program's own module comes first:\n{}", r.describe());
    let r = cordon_run(who).args(["--lang", "python", "--json", "-c", "import sklearn"]).run_json();
    if r.status() == "runtime_error" {
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("--packages scikit-learn (PyPI's name for `sklearn`)"), "{}", r.describe());
    }
    // The program's own failure otherwise: no such message.
    let r = cordon_run(who).args(["--lang", "python", "--json", "-c", "raise SystemExit(3)"]).run_json();
    assert_eq!((r.code(), r.get("/message")), (3, &serde_json::Value::Null), "{}", r.describe());
    if toolchain_ready("node", "a_missing_module_is_met_with_how_to_install_it") {
        let r = cordon_run(who).args(["--lang", "node", "--json", "-c", "require('cordon-no-such-pkg/x')"]).run_json();
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("--file cordon-no-such-pkg.js=PATH and load it by its path") && msg.contains("--packages cordon-no-such-pkg (the package's name may differ"), "{}", r.describe());
        // An ES module's import is met the same way.
        let (_d, mjs) = source_file("main.mjs", "import x from 'cordon-no-such-pkg';\n");
        let r = cordon_run(who).args(["--lang", "node", "--json"]).arg(&mjs).run_json();
        let msg = r.get("/message").as_str().unwrap_or("");
        assert!(msg.contains("failed to import `cordon-no-such-pkg`") && msg.contains("--packages cordon-no-such-pkg"), "{}", r.describe());
    }
});

both!(fn env_reaches_the_program(who) {
    let r = cordon_run(who)
        .arg("--lang")
        .arg("python")
        .arg("--json")
        .arg("--env")
        .arg("CORDON_TEST_GREETING=hi there")
        .arg("-c")
        .arg("import os; print(os.environ.get('CORDON_TEST_GREETING'))")
        .run_json();
    assert_eq!(r.expect_ok(), "hi there\n", "{}", r.describe());
});

// A PATH in the program's environment (`--env`, a request's `env`) is the program's: the
// profile's interpreter is still found on the profile's PATH, and the program sees its own
// PATH (so what it starts by name is looked up there). `cordon exec`'s command is the
// caller's own and is looked up on the PATH it is given.
both!(fn a_programs_path_does_not_move_its_interpreter(who) {
    let show = "import os; print(os.environ['PATH'])";
    let r = cordon_run(who).args(["--lang", "python", "--json", "--env", "PATH=/nope", "-c", show]).run_json();
    assert_eq!(r.expect_ok(), "/nope\n", "{}", r.describe());
    let req = json!({"language": "python", "code": show, "env": {"PATH": "/nope"}});
    let r = cordon_run(who).args(["--request", "-"]).stdin(Input::Bytes(req.to_string().into_bytes())).run_json();
    assert_eq!(r.expect_ok(), "/nope\n", "{}", r.describe());
    // bash is found; the `ls` the script starts is looked up on the script's PATH.
    let req = json!({"language": "bash", "code": "echo \"$PATH\"; ls / >/dev/null 2>&1 || echo 'no ls'", "env": {"PATH": "/nope"}});
    let r = cordon_run(who).args(["--request", "-"]).stdin(Input::Bytes(req.to_string().into_bytes())).run_json();
    assert_eq!(r.expect_ok(), "/nope\nno ls\n", "{}", r.describe());
    let r = Cordon::exec(who, &["--json", "--env", "PATH=/nope"], &["python3", "-c", "print(1)"]).run_json();
    assert_eq!((r.status(), r.code()), ("runtime_error", 127), "{}", r.describe());
    assert!(r.get("/message").as_str().unwrap_or("").contains("searched PATH=/nope"), "{}", r.describe());
});

// A profile whose interpreter is on its own PATH, in a directory `--ro-bind` shows (a
// toolchain under /opt, as conda or pyenv install one): the toolchain check finds it through
// the bind, the run starts it from there, and `cordon profiles` asks for the version on the
// same PATH.
both!(fn a_profiles_own_path_finds_its_interpreter(who) {
    use std::os::unix::fs::PermissionsExt;
    let dir = shared_tempdir();
    let tool = dir.path().join("tool");
    let bin = tool.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_world_readable(&bin.join("interp"), b"#!/bin/sh\necho \"interp on $PATH\"\nexec sh \"$@\"\n");
    for (p, mode) in [(&tool, 0o755), (&bin, 0o755), (&bin.join("interp"), 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let profile = dir.path().join("interp.toml");
    write_world_readable(
        &profile,
        b"name = \"interp\"\ndescription = \"an interpreter of its own\"\nsource = \"main.sh\"\nrun = [\"interp\", \"{source}\"]\nversion = [\"sh\", \"-c\", \"echo $PATH\"]\n[env]\nPATH = \"/tool/bin:/usr/bin:/bin\"\n",
    );
    let profile = profile.to_str().unwrap();
    let bind = format!("{}:/tool", tool.display());
    let run = |extra: &[&str]| {
        cordon_run(who)
            .args(["--profile", profile, "--lang", "interp", "--rootfs", "host", "--json", "--no-history"])
            .args(extra)
            .args(["-c", "echo ran"])
            .run_json()
    };
    let r = run(&["--ro-bind", &bind]);
    assert_eq!(r.expect_ok(), "interp on /tool/bin:/usr/bin:/bin\nran\n", "{}", r.describe());
    // A package install does not see the bind (its scripts reach the registry): it cannot
    // install for that interpreter, and says so rather than install for another one.
    let r = run(&["--ro-bind", &bind, "--packages", "six"]);
    assert_eq!((r.status(), r.get("/errorKind")), ("sandbox_error", &json!("request")), "{}", r.describe());
    assert!(r.get("/message").as_str().unwrap_or("").contains("is in a --ro-bind directory"), "{}", r.describe());
    // Without the bind it is nowhere the sandbox looks, and the message says where that was.
    let r = run(&[]);
    assert_eq!((r.status(), r.get("/errorKind")), ("sandbox_error", &json!("request")), "{}", r.describe());
    let msg = r.get("/message").as_str().unwrap_or("");
    assert!(
        msg.contains("the interp toolchain is missing") && msg.contains("(looked for on the profile's PATH=/tool/bin:/usr/bin:/bin)"),
        "{}",
        r.describe()
    );
    let f = Cordon::new(who).args(["profiles", "--json", "--profile", profile]).run();
    assert_eq!(f.code, 0, "{}", f.describe());
    let list: Value = serde_json::from_slice(&f.stdout).unwrap();
    let p = list.as_array().unwrap().iter().find(|p| p["language"] == json!("interp"));
    assert_eq!(p.map(|p| &p["version"]), Some(&json!("/tool/bin:/usr/bin:/bin")), "{}", f.describe());

    // `cordon profiles` finds the version's program on the profile's PATH too: a root
    // filesystem whose only program is /opt/bb/busybox.
    if !Path::new("/bin/busybox").is_file() {
        skip_unless_required!("SKIP: a_profiles_own_path_finds_its_interpreter: no /bin/busybox (apt-get install busybox-static)");
        return;
    }
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("opt/bb")).unwrap();
    std::fs::copy("/bin/busybox", root.join("opt/bb/busybox")).unwrap();
    for (p, mode) in [(root.clone(), 0o755), (root.join("opt"), 0o755), (root.join("opt/bb"), 0o755), (root.join("opt/bb/busybox"), 0o755)] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let bb = dir.path().join("bb.toml");
    write_world_readable(
        &bb,
        format!(
            "name = \"bb\"\ndescription = \"busybox\"\nsource = \"main.sh\"\nrun = [\"busybox\", \"sh\", \"{{source}}\"]\nversion = [\"busybox\", \"echo\", \"bb on its path\"]\nrootfs = \"{}\"\n[env]\nPATH = \"/opt/bb\"\n",
            root.display()
        )
        .as_bytes(),
    );
    let f = Cordon::new(who).args(["profiles", "--json", "--profile", bb.to_str().unwrap()]).run();
    let list: Value = serde_json::from_slice(&f.stdout).unwrap_or_else(|e| panic!("{e}\n{}", f.describe()));
    let p = list.as_array().unwrap().iter().find(|p| p["language"] == json!("bb"));
    assert_eq!(p.map(|p| &p["version"]), Some(&json!("bb on its path")), "{}", f.describe());
    let r = cordon_run(who).args(["--profile", bb.to_str().unwrap(), "--lang", "bb", "--json", "--no-history", "-c", "echo ran"]).run_json();
    assert_eq!(r.expect_ok(), "ran\n", "{}", r.describe());
});

// Data larger than --file's 64 MiB cap ("analyse this CSV") reaches `cordon run` as a
// read-only directory, as with `cordon exec --ro-bind`; a request cannot ask for one.
both!(fn ro_bind_shows_host_data_to_the_program(who) {
    let dir = shared_tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    write_world_readable(&data.join("t.csv"), b"a,b\n1,2\n3,4\n");
    let bind = format!("{}:/data", data.display());
    let py = "import csv\nrows = list(csv.reader(open('/data/t.csv')))\nprint(len(rows))\ntry:\n    open('/data/new', 'w')\nexcept OSError as e:\n    print(e.errno)\n";
    let r = cordon_run(who)
        .args(["--lang", "python", "--json", "--ro-bind", &bind, "-c", py])
        .run_json();
    // Three rows read; the write refused (EROFS).
    assert_eq!(r.expect_ok(), "3\n30\n", "{}", r.describe());
    assert_eq!(
        r.get("/isolation/binds"),
        &serde_json::json!([format!("/data <- {} (read-only)", std::fs::canonicalize(&data).unwrap().display())]),
        "{}",
        r.describe()
    );
    // Not with a request, whose author may not name host paths.
    let plain = cordon_run(who).args(["--ro-bind", &bind, "--request", "-"]).run();
    assert_eq!(plain.code, 125, "{}", plain.describe());
    assert!(plain.stderr_str().contains("--ro-bind"), "{}", plain.describe());
});

both!(fn unknown_language_is_a_cordon_error(who) {
    let plain = cordon_run(who).arg("--lang").arg("cobol-nope").arg("-c").arg("x").run();
    assert_eq!(plain.code, 125, "{}", plain.describe());
    assert!(
        plain.stderr_str().contains("cobol-nope"),
        "the error must name the language:\n{}",
        plain.describe()
    );
});

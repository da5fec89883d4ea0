//! Compiles the built-in seccomp policies (`profiles/seccomp/<name>.toml`) to BPF at build
//! time, with the same parser and compiler the library uses for user policies (included below
//! with `#[path]`), and writes each program to `$OUT_DIR/seccomp-<name>.bpf`, which
//! `src/security/seccomp/mod.rs` embeds. The format: each `struct sock_filter` as 8
//! little-endian bytes, `code: u16, jt: u8, jf: u8, k: u32`.
//!
//! A policy that does not parse or compile fails the build, with the same message a user
//! policy would get at run time.

// The library's modules, included as they are; the build script uses only part of each.
#[allow(dead_code)]
#[path = "src/security/seccomp/compile.rs"]
mod compile;
#[allow(dead_code)]
#[path = "src/security/seccomp/error.rs"]
mod error;
#[allow(dead_code)]
#[path = "src/security/seccomp/policy.rs"]
mod policy;
#[allow(dead_code)]
#[path = "src/security/seccomp/syscalls.rs"]
mod syscalls;

use error::{EntryProblem, SeccompError};
use std::path::PathBuf;

fn main() {
    for file in ["compile.rs", "error.rs", "policy.rs", "syscalls.rs"] {
        println!("cargo::rerun-if-changed=src/security/seccomp/{file}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");
    // The built-in policies, and the extra layers of the rlimit backend (the memory watch's,
    // the CPU pin's: not policies of their own, and never installed alone).
    let mut parsed = std::collections::BTreeMap::new();
    for name in policy::BUILTINS
        .iter()
        .chain(&["memory-watch", "no-tcp", "cpu-pin"])
    {
        let path = format!("profiles/seccomp/{name}.toml");
        println!("cargo::rerun-if-changed={path}");
        parsed.insert(*name, parse_builtin(name, &path));
        // The text compiled, beside its program: the library checks at compile time that it
        // is the file as it is now (see `src/security/seccomp/mod.rs`).
        std::fs::copy(&path, out.join(format!("seccomp-{name}.toml")))
            .unwrap_or_else(|e| panic!("cannot copy {path}: {e}"));
    }
    // Each built-in policy alone, and with the extra layers the rlimit backend adds, as one
    // program each (compile::compile_layered): `seccomp-<policy>[+memory-watch[+no-tcp]][+cpu-pin].bpf`.
    for name in policy::BUILTINS {
        for extras in [
            &[][..],
            &["memory-watch"],
            &["cpu-pin"],
            &["memory-watch", "cpu-pin"],
            // no-tcp only ever comes with the memory watch (launch::prepare).
            &["memory-watch", "no-tcp"],
            &["memory-watch", "no-tcp", "cpu-pin"],
        ] {
            let layers: Vec<&str> = std::iter::once(*name)
                .chain(extras.iter().copied())
                .collect();
            let joined = layers.join("+");
            // The syscall table and the guard are x86_64's; elsewhere the library refuses
            // seccomp before it looks at the (empty) embedded program.
            let bytes = if x86_64 {
                let policies: Vec<&policy::Policy> = layers.iter().map(|l| &parsed[l]).collect();
                encode(
                    &compile::compile_layered(&policies)
                        .unwrap_or_else(|e| panic!("profiles/seccomp ({joined}): {e}")),
                )
            } else {
                Vec::new()
            };
            std::fs::write(out.join(format!("seccomp-{joined}.bpf")), bytes)
                .unwrap_or_else(|e| panic!("cannot write the compiled {joined}: {e}"));
        }
    }
}

fn parse_builtin(name: &str, path: &str) -> policy::Policy {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let policy = policy::parse(&format!("built-in policy `{name}` ({path})"), &text)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(
        policy.name, name,
        "{path}: the `name` key must be the built-in policy's name"
    );
    policy
}

fn encode(program: &[seccompiler::sock_filter]) -> Vec<u8> {
    program
        .iter()
        .flat_map(|i| {
            let mut b = [0u8; 8];
            b[..2].copy_from_slice(&i.code.to_le_bytes());
            b[2] = i.jt;
            b[3] = i.jf;
            b[4..].copy_from_slice(&i.k.to_le_bytes());
            b
        })
        .collect()
}

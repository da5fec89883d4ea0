//! `cordon run --packages`, as root and as the unprivileged user, against a package index on
//! the host's loopback (a PEP 503 simple index with a wheel built by the test, and a
//! one-package npm registry): installed before the code runs, with the network opened to the
//! index only, then cached — the second run touches no network — and read-only to the
//! program, whose own sandbox has no network. A failed install is `dependency_error`.
//!
//! Every test uses a fresh index port, which is part of the cache key, so each starts with a
//! cache miss.

#[macro_use]
mod common;
mod net_support;

use common::*;
use std::path::Path;

/// A local PEP 503 index holding `cordon-dep` 1.0, served on loopback: its directory, the
/// servers and the index URL. `None` (after a SKIP line) when this python has no pip.
fn local_pypi(test: &str) -> Option<(tempfile::TempDir, net_support::Servers, String)> {
    if !pip_available() {
        skip_unless_required!(
            "SKIP: {test}: /usr/bin/python3 has no pip (apt-get install python3-pip)"
        );
        return None;
    }
    let root = tempfile::tempdir().unwrap();
    net_support::write_pypi_index(root.path());
    let srv = net_support::start(test, Some(root.path()), false)?;
    let index = format!("http://localhost:{}/simple", srv.http);
    Some((root, srv, index))
}

fn pip_available() -> bool {
    std::process::Command::new("/usr/bin/python3")
        .args(["-m", "pip", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn run_with_packages(who: Who, lang: &str, index: &str, pkgs: &str, code: &str) -> JsonRun {
    Cordon::new(who)
        .arg("run")
        .args_from(&[
            "--lang",
            lang,
            "--rootfs",
            "host",
            "--no-history",
            "--json",
            "--packages",
            pkgs,
            "--package-index",
            index,
            "-c",
            code,
        ])
        .deadline(std::time::Duration::from_secs(240))
        .run_json()
}

trait ArgsFrom {
    fn args_from(self, a: &[&str]) -> Self;
}
impl ArgsFrom for Cordon {
    fn args_from(mut self, a: &[&str]) -> Self {
        for x in a {
            self = self.arg(x);
        }
        self
    }
}

const PY_CODE: &str = r#"
import cordon_dep, os, urllib.request
print(cordon_dep.VALUE)
print(cordon_dep.__file__)
try:
    open("/deps/python/planted.py", "w"); print("deps writable")
except OSError as e:
    print("deps read-only", e.errno)
print("proxy vars:", sorted(k for k in os.environ if "proxy" in k.lower()))
"#;

both!(
    /// pip from a local simple index: installed (the index reached through the proxy and
    /// counted), importable, read-only; the second run is a cache hit that touches no network.
    fn pip_install_and_cache_hit(who) {
        let Some((_root, srv, index)) = local_pypi("pip_install_and_cache_hit") else {
            return;
        };
        let r = run_with_packages(who, "python", &index, "cordon-dep", PY_CODE);
        let out = r.expect_ok().to_string();
        assert!(out.starts_with("installed from the local index\n/deps/python/cordon_dep/"), "{}", r.describe());
        assert!(out.contains("deps read-only 30"), "the set must be read-only (EROFS):\n{}", r.describe());
        assert!(out.contains("proxy vars: []"), "the program itself has no network:\n{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false, "{}", r.describe());
        assert_eq!(r.get("/dependencies/status"), "ok");
        assert_eq!(r.get("/network/mode"), "none", "{}", r.describe());
        let allowed = r.get("/dependencies/network/allowed").as_array().cloned().unwrap_or_default();
        assert_eq!(allowed.len(), 1, "{}", r.describe());
        assert_eq!(allowed[0]["host"], "localhost");
        assert!(allowed[0]["connections"].as_u64().unwrap() >= 1);
        assert!(allowed[0]["bytesDown"].as_u64().unwrap() > 500, "{}", r.describe());
        let seen = srv.requests();
        assert!(seen.iter().any(|l| l.contains("/simple/cordon-dep/")), "{seen:?}");
        assert!(seen.iter().any(|l| l.ends_with(".whl")), "{seen:?}");

        // Second run: the cache, no install, no network.
        let before = srv.requests().len();
        let r = run_with_packages(who, "python", &index, "cordon-dep", PY_CODE);
        assert!(r.expect_ok().starts_with("installed from the local index\n"), "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), true, "{}", r.describe());
        assert!(r.get("/dependencies/network").is_null(), "{}", r.describe());
        assert_eq!(srv.requests().len(), before, "the cache hit must not touch the index");
    }
);

/// The JSON lines of a `--stream` run: its pieces, then its result.
fn streamed(f: &Finished) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut lines = f.json_lines();
    let result = lines
        .pop()
        .unwrap_or_else(|| panic!("no output:\n{}", f.describe()));
    (lines, result)
}

both!(
    /// `--stream` streams the install's output too, each piece inside `dependencies`, before
    /// the program's own pieces; they add up to the result's `dependencies.output` and `.error`.
    fn an_install_streams_its_output(who) {
        let Some((_root, _srv, index)) = local_pypi("an_install_streams_its_output") else {
            return;
        };
        let f = Cordon::new(who)
            .arg("run")
            .args_from(&["--lang", "python", "--rootfs", "host", "--no-history", "--json", "--stream"])
            .args_from(&["--packages", "cordon-dep", "--package-index", &index, "-c", "print('ran')"])
            .deadline(std::time::Duration::from_secs(240))
            .run();
        assert_eq!(f.code, 0, "{}", f.describe());
        let (pieces, result) = streamed(&f);
        assert_eq!(result["dependencies"]["cached"], false, "{}", f.describe());
        let phase = |v: &serde_json::Value, key: &str| v["dependencies"][key].as_str().map(String::from);
        let out: String = pieces.iter().filter_map(|v| phase(v, "stdout")).collect();
        let err: String = pieces.iter().filter_map(|v| phase(v, "stderr")).collect();
        assert!(!out.is_empty(), "pip's output is streamed:\n{}", f.describe());
        assert_eq!(
            (Some(out.as_str()), Some(err.as_str())),
            (result["dependencies"]["output"].as_str(), result["dependencies"]["error"].as_str()),
            "{}",
            f.describe()
        );
        // The install's pieces, then the program's: one key each.
        let first_program = pieces.iter().position(|v| v.get("stdout").is_some()).unwrap_or_else(|| panic!("{}", f.describe()));
        assert!(pieces[first_program..].iter().all(|v| v.get("dependencies").is_none()), "{}", f.describe());
        // A piece is what one read got (`python3 -u` writes "ran" and "\n" apart).
        let program: String = pieces[first_program..].iter().filter_map(|v| v["stdout"].as_str()).collect();
        assert_eq!(program, "ran\n", "{}", f.describe());
        assert!(pieces.iter().all(|v| v.as_object().is_some_and(|o| o.len() == 1)), "{}", f.describe());
    }
);

both!(
    /// Two concurrent first installs of the same set both succeed (one publishes, the other's
    /// copy is dropped) and a third run hits the cache.
    fn concurrent_installs_of_one_set(who) {
        let Some((_root, _srv, index)) = local_pypi("concurrent_installs_of_one_set") else {
            return;
        };
        let code = "import cordon_dep; print(cordon_dep.VALUE)";
        let runs: Vec<JsonRun> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| s.spawn(|| run_with_packages(who, "python", &index, "cordon-dep", code)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in &runs {
            assert_eq!(r.expect_ok(), "installed from the local index\n", "{}", r.describe());
        }
        let r = run_with_packages(who, "python", &index, "cordon-dep", code);
        r.expect_ok();
        assert_eq!(r.get("/dependencies/cached"), true, "{}", r.describe());
    }
);

both!(
    /// A package the index does not have: status dependency_error, exit 1, pip's message in
    /// dependencies.error; the program did not run.
    fn pip_failure_is_a_dependency_error(who) {
        let Some((_root, _srv, index)) = local_pypi("pip_failure_is_a_dependency_error") else {
            return;
        };
        let r = run_with_packages(who, "python", &index, "no-such-package-xyz", "print('ran')");
        assert_eq!(r.status(), "dependency_error", "{}", r.describe());
        assert_eq!(r.code(), 1, "{}", r.describe());
        assert_eq!(r.output(), "", "the program must not run:\n{}", r.describe());
        let err = r.get("/dependencies/error").as_str().unwrap_or("");
        assert!(
            err.contains("No matching distribution") || err.contains("Could not find a version"),
            "{}",
            r.describe()
        );
        // Option-like package names never reach pip.
        let f = Cordon::new(who)
            .arg("run")
            .args_from(&["--lang", "python", "--rootfs", "host", "--no-history", "--packages", "--index-url=http://x", "-c", "1"])
            .run();
        assert_eq!(f.code, 125, "{}", f.describe());
        assert!(Path::new("/usr/bin/python3").exists());
    }
);

/// The directory an npm registry is written into and its server on loopback; `None` (after a
/// SKIP line) without npm and node.
fn npm_registry_server(test: &str) -> Option<(tempfile::TempDir, net_support::Servers)> {
    if !Path::new("/usr/bin/npm").exists() || !Path::new("/usr/bin/node").exists() {
        skip_unless_required!(
            "SKIP: {test}: /usr/bin/npm or /usr/bin/node is missing (apt-get install nodejs npm)"
        );
        return None;
    }
    let root = tempfile::tempdir().unwrap();
    let srv = net_support::start(test, Some(root.path()), false)?;
    Some((root, srv))
}

both!(
    /// npm from a one-package registry on loopback: installed, require()-able, cached.
    fn npm_install_and_cache_hit(who) {
        let Some((root, srv)) = npm_registry_server("npm_install_and_cache_hit") else {
            return;
        };
        net_support::write_npm_registry(root.path(), srv.http);
        let index = format!("http://localhost:{}/", srv.http);
        let code = "console.log(require('cordon-dep'))";
        let r = run_with_packages(who, "node", &index, "cordon-dep", code);
        assert_eq!(r.expect_ok(), "installed from the local registry\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false);
        assert_eq!(r.get("/dependencies/installer"), "npm");
        assert!(srv.requests().iter().any(|l| l.ends_with(".tgz")), "{:?}", srv.requests());
        let before = srv.requests().len();
        let r = run_with_packages(who, "node", &index, "cordon-dep", code);
        assert_eq!(r.expect_ok(), "installed from the local registry\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), true, "{}", r.describe());
        assert_eq!(srv.requests().len(), before, "the cache hit must not touch the registry");
    }
);

both!(
    /// An install cannot fill the host's disk: npm runs a package's install script, which
    /// here writes 16 MiB into the set, past the install sandbox's 8 MiB workspace (a
    /// profile's `[packages.limits] workspace_size`). The set is written to a tmpfs of that
    /// size, copied out only once the installer succeeded: the script gets ENOSPC and the run
    /// is a dependency error. (It used to write into a host directory bound writable, as much
    /// as it liked for as long as the install ran, and the set was published.) A script within
    /// the size runs, and what it wrote is in the set.
    fn an_install_script_cannot_write_past_the_install_size(who) {
        let Some((root, srv)) = npm_registry_server("an_install_script_cannot_write_past_the_install_size") else {
            return;
        };
        let fill = |n: u32, size: &str| {
            format!("node -e \"for (let i = 0; i < {n}; i++) require('fs').writeFileSync('/deps/node/fill' + i, Buffer.alloc({size}, 1))\"")
        };
        net_support::write_npm_package(root.path(), srv.http, "cordon-fill", &fill(4, "4 << 20"));
        net_support::write_npm_package(root.path(), srv.http, "cordon-fits", &fill(2, "1 << 20"));
        let dir = shared_tempdir();
        let profile = dir.path().join("node-small.toml");
        write_world_readable(&profile, br#"
name = "node-small-install"
description = "Node.js, installs bounded to 8 MiB"
source = "main.js"
run = ["node", "{source}"]
version = ["node", "--version"]
rootfs = "auto"
[packages]
installer = "npm"
index = "https://registry.npmjs.org/"
hosts = ["registry.npmjs.org"]
[packages.limits]
timeout = "120s"
memory = "1G"
workspace_size = "8M"
"#);
        let index = format!("http://localhost:{}/", srv.http);
        let run = |pkg: &str, code: &str| {
            Cordon::new(who)
                .arg("run")
                .args_from(&[
                    "--profile", profile.to_str().unwrap(), "--lang", "node-small-install",
                    "--rootfs", "host", "--no-history", "--json", "--packages", pkg,
                    "--package-index", &index, "-c", code,
                ])
                .deadline(std::time::Duration::from_secs(240))
                .run_json()
        };
        let r = run("cordon-fill", "console.log('the program ran')");
        assert_eq!(r.status(), "dependency_error", "{}", r.describe());
        let err = r.get("/dependencies/error").as_str().unwrap_or("").to_string();
        assert!(err.contains("ENOSPC"), "the script must hit the tmpfs's size:\n{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or_default();
        assert!(
            msg.starts_with("installing the packages failed: npm exited with code ")
                && msg.contains("/deps")
                && msg.contains("workspace_size in the profile's [packages.limits]"),
            "the message must name the full filesystem and what raises it:\n{}",
            r.describe()
        );
        assert!(!r.get("/output").as_str().unwrap_or("").contains("the program ran"), "{}", r.describe());

        let r = run("cordon-fits", "console.log(require('fs').statSync('/deps/node/fill1').size)");
        assert_eq!(r.expect_ok(), "1048576\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false, "{}", r.describe());
    }
);

/// `cordon run --packages-lock FILE` (no --packages) against a local index or registry.
fn run_with_lock(who: Who, lang: &str, index: &str, lock: &Path, code: &str) -> JsonRun {
    Cordon::new(who)
        .arg("run")
        .args_from(&[
            "--lang",
            lang,
            "--rootfs",
            "host",
            "--no-history",
            "--json",
            "--package-index",
            index,
        ])
        .arg("--packages-lock")
        .arg(lock)
        .args_from(&["-c", code])
        .deadline(std::time::Duration::from_secs(240))
        .run_json()
}

both!(
    /// pip from a lock (a requirements file with the wheel's sha256: pip checks it): installed,
    /// cached by the lock's contents; another lock text is another set; a wrong hash fails as
    /// a dependency_error.
    fn pip_lock_is_installed_and_keys_the_cache(who) {
        let Some((root, _srv, index)) = local_pypi("pip_lock_is_installed_and_keys_the_cache") else {
            return;
        };
        let whl = std::fs::read(root.path().join("files/cordon_dep-1.0-py3-none-any.whl")).unwrap();
        let sha = sha256_hex(&whl);
        let dir = shared_tempdir();
        let lock = dir.path().join("requirements.lock");
        write_world_readable(&lock, format!("cordon-dep==1.0 --hash=sha256:{sha}\n").as_bytes());
        let code = "import cordon_dep; print(cordon_dep.VALUE)";
        let r = run_with_lock(who, "python", &index, &lock, code);
        assert_eq!(r.expect_ok(), "installed from the local index\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false, "{}", r.describe());
        let r = run_with_lock(who, "python", &index, &lock, code);
        assert_eq!(r.get("/dependencies/cached"), true, "the same lock is the same set:\n{}", r.describe());
        // Another lock text (a comment) is another key: installed again.
        write_world_readable(&lock, format!("# v2\ncordon-dep==1.0 --hash=sha256:{sha}\n").as_bytes());
        let r = run_with_lock(who, "python", &index, &lock, code);
        assert_eq!(r.expect_ok(), "installed from the local index\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false, "{}", r.describe());
        // A hash that does not match the wheel: pip refuses, cordon says dependency_error.
        write_world_readable(&lock, format!("cordon-dep==1.0 --hash=sha256:{}\n", "0".repeat(64)).as_bytes());
        let r = run_with_lock(who, "python", &index, &lock, code);
        assert_eq!(r.status(), "dependency_error", "{}", r.describe());
        assert!(r.get("/dependencies/error").as_str().unwrap_or("").contains("HASH"), "pip's message must be kept:\n{}", r.describe());
    }
);

both!(
    /// npm from a package-lock.json (`npm ci`): installed as locked, and cached.
    fn npm_lock_is_installed_with_npm_ci(who) {
        let Some((root, srv)) = npm_registry_server("npm_lock_is_installed_with_npm_ci") else {
            return;
        };
        net_support::write_npm_registry(root.path(), srv.http);
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(root.path().join("cordon-dep")).unwrap()).unwrap();
        let dist = &doc["versions"]["1.0.0"]["dist"];
        let lock = serde_json::json!({
            "name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": true,
            "packages": {
                "": {"name": "app", "version": "1.0.0", "dependencies": {"cordon-dep": "1.0.0"}},
                "node_modules/cordon-dep": {"version": "1.0.0", "resolved": dist["tarball"], "integrity": dist["integrity"]}
            }
        });
        let dir = shared_tempdir();
        let path = dir.path().join("package-lock.json");
        write_world_readable(&path, &serde_json::to_vec(&lock).unwrap());
        let index = format!("http://localhost:{}/", srv.http);
        let code = "console.log(require('cordon-dep'))";
        let r = run_with_lock(who, "node", &index, &path, code);
        assert_eq!(r.expect_ok(), "installed from the local registry\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false, "{}", r.describe());
        let r = run_with_lock(who, "node", &index, &path, code);
        assert_eq!(r.get("/dependencies/cached"), true, "{}", r.describe());
    }
);

/// A python profile whose install sandbox has `[packages.limits]` `limits` (TOML lines), for
/// `--profile`; its language is `name`.
fn python_profile_with(dir: &Path, name: &str, limits: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    write_world_readable(
        &path,
        format!(
            r#"
name = "{name}"
description = "Python 3, with other install limits"
source = "main.py"
run = ["python3", "-u", "{{source}}"]
version = ["python3", "--version"]
rootfs = "auto"
[packages]
installer = "pip"
index = "https://pypi.org/simple"
hosts = ["pypi.org", "files.pythonhosted.org"]
[packages.limits]
timeout = "120s"
memory = "1G"
{limits}
"#
        )
        .as_bytes(),
    );
    path
}

both!(
    /// pip keeps its downloads and the tree `pip --target` builds in TMPDIR until the end of
    /// the install: a set larger than the install sandbox's /tmp (pandas with matplotlib and
    /// the default 256 MiB, here a 12 MiB wheel and an 8 MiB /tmp) failed with ENOSPC. TMPDIR
    /// is now on the tmpfs the set is installed into, so /tmp does not matter, the
    /// temporary directory is not part of the set; and when that tmpfs fills, the message
    /// says which one and what raises it (pip removed its files before it exited, so no
    /// filesystem was full by then), not "runtime_error in the install sandbox".
    fn a_set_larger_than_the_install_tmp_installs_and_a_full_deps_is_named(who) {
        let test = "a_set_larger_than_the_install_tmp_installs_and_a_full_deps_is_named";
        if !pip_available() {
            skip_unless_required!("SKIP: {test}: /usr/bin/python3 has no pip (apt-get install python3-pip)");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        net_support::write_pypi_wheel_with(
            root.path(),
            "cordon-big",
            "1.0",
            &[("cordon_big/__init__.py", "VALUE = 'big'\n")],
            12 << 20,
        );
        let Some(srv) = net_support::start(test, Some(root.path()), false) else { return };
        let index = format!("http://localhost:{}/simple", srv.http);
        let dir = shared_tempdir();
        let run = |profile: &Path, lang: &str, code: &str| {
            Cordon::new(who)
                .arg("run")
                .args_from(&["--profile", profile.to_str().unwrap(), "--lang", lang, "--rootfs", "host", "--no-history", "--json", "--packages", "cordon-big", "--package-index", &index, "-c", code])
                .deadline(std::time::Duration::from_secs(240))
                .run_json()
        };
        // First the failure (a failed install is not cached; the same set installs below):
        // the wheel and pip's tree (24 MiB) do not fit a 16 MiB /deps.
        let small = python_profile_with(dir.path(), "py-small-deps", "workspace_size = \"16M\"");
        let r = run(&small, "py-small-deps", "print('the program ran')");
        assert_eq!((r.status(), r.code()), ("dependency_error", 1), "{}", r.describe());
        assert_eq!(r.output(), "", "{}", r.describe());
        let msg = r.get("/message").as_str().unwrap_or_default().to_string();
        assert!(
            msg.starts_with("installing the packages failed: pip exited with code 1; ")
                && msg.contains("/deps, a tmpfs of 16 MiB: raise workspace_size in the profile's [packages.limits]")
                && !msg.contains("in the install sandbox)"),
            "the message must name the full filesystem and what raises it:\n{}",
            r.describe()
        );
        assert!(
            r.get("/dependencies/error").as_str().unwrap_or_default().contains("No space left on device"),
            "{}",
            r.describe()
        );
        // An 8 MiB /tmp: the wheel alone would not have fit there.
        let tiny_tmp = python_profile_with(dir.path(), "py-tiny-tmp", "tmp_size = \"8M\"");
        let r = run(
            &tiny_tmp,
            "py-tiny-tmp",
            "import cordon_big, os; print(cordon_big.VALUE, os.path.getsize(os.path.join(os.path.dirname(cordon_big.__file__), 'filler.bin')), sorted(os.listdir('/deps')))",
        );
        assert_eq!(r.expect_ok(), format!("big {} ['python']\n", 12 << 20), "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), false, "{}", r.describe());
        assert!(r.get("/dependencies/memoryUsed").as_u64().unwrap_or(0) > 12 << 20, "{}", r.describe());
    }
);

both!(
    /// ES-module `import` ignores NODE_PATH and looks in the node_modules directories above
    /// the importing file: the set's node_modules is bound read-only at /node_modules, so a
    /// .mjs file's import, a dynamic import() from CommonJS code (`-c` is main.js) and
    /// require() all find the package, at one path (one instance of it), and nothing is added
    /// to /workspace, whose files are the program's output.
    fn npm_packages_are_found_by_es_module_imports(who) {
        let Some((root, srv)) = npm_registry_server("npm_packages_are_found_by_es_module_imports") else {
            return;
        };
        net_support::write_npm_registry(root.path(), srv.http);
        let index = format!("http://localhost:{}/", srv.http);
        let dir = shared_tempdir();
        let mjs = dir.path().join("app.mjs");
        write_world_readable(&mjs, br#"
import dep from 'cordon-dep';
import { createRequire } from 'node:module';
import { writeFileSync, readdirSync } from 'node:fs';
const require = createRequire(import.meta.url);
console.log(dep);
console.log(require.resolve('cordon-dep'), import.meta.resolve('cordon-dep'));
console.log(require('cordon-dep') === dep);
try { writeFileSync('/node_modules/planted.js', 'x'); console.log('writable'); } catch (e) { console.log(e.code); }
console.log(readdirSync('/workspace').join(','));
"#);
        let run = |args: &[&str]| {
            Cordon::new(who)
                .arg("run")
                .args_from(&["--lang", "node", "--rootfs", "host", "--no-history", "--json", "--packages", "cordon-dep", "--package-index", &index])
                .args_from(args)
                .deadline(std::time::Duration::from_secs(240))
                .run_json()
        };
        let r = run(&[mjs.to_str().unwrap()]);
        assert_eq!(
            r.expect_ok(),
            "installed from the local registry\n/node_modules/cordon-dep/index.js file:///node_modules/cordon-dep/index.js\ntrue\nEROFS\napp.mjs\n",
            "{}",
            r.describe()
        );
        let files: Vec<String> = r.get("/files").as_array().cloned().unwrap_or_default().iter().map(|f| f["path"].as_str().unwrap_or("").to_string()).collect();
        assert!(files.is_empty(), "the program wrote nothing, so nothing is collected:\n{}", r.describe());
        // CommonJS code (-c is main.js): a dynamic import() resolves as an ES module does.
        let r = run(&["-c", "import('cordon-dep').then(m => console.log(m.default, process.env.NODE_PATH))"]);
        assert_eq!(r.expect_ok(), "installed from the local registry /node_modules\n", "{}", r.describe());
        assert_eq!(r.get("/dependencies/cached"), true, "{}", r.describe());
        // A static import in -c code: node (20.19+, 22.7+) runs main.js with module syntax as
        // an ES module; an older node refuses the syntax in a .js file, whatever cordon binds.
        let r = run(&["-c", "import dep from 'cordon-dep';\nconsole.log(dep);\n"]);
        if r.get("/error").as_str().unwrap_or("").contains("Cannot use import statement outside a module") {
            println!("node runs main.js as CommonJS only: the static import in -c code is not checked");
        } else {
            assert_eq!(r.expect_ok(), "installed from the local registry\n", "{}", r.describe());
        }
    }
);

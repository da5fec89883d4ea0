//! `cordon run --packages`: dependencies installed in a sandbox of their own, cached by content.
//!
//! 1. The key: installer, the sorted package list (pins included: the list is the lock), the
//!    index URL, the interpreter's identity as the sandbox sees it (path, size, mtime) and the
//!    root filesystem. A set already in the cache is used as it is: no install, no network.
//! 2. Otherwise the installer (pip `--target`, npm `--prefix`) runs in a sandbox whose network
//!    is `allow=` the profile's registry hosts (or the `--package-index` host alone), under
//!    the profile's `[packages.limits]`, writing into a tmpfs at `/deps` as large as the
//!    install sandbox's workspace, its temporary files too (`TMPDIR` is `/deps/.tmp`, left
//!    out of the set). Once the installer has exited 0, the sandbox's init copies
//!    that tree into a fresh host directory (`spec::Export`): an install, or a package's
//!    install script, cannot write more to the host's disk than the tmpfs holds.
//! 3. That directory is renamed into the cache atomically (`rename(2)` of a directory: a
//!    reader sees the whole set or none; of two concurrent installs of one key the first
//!    rename wins and the other's copy is removed).
//! 4. The program's own sandbox gets the set bound read-only at `/deps` (an npm set's
//!    `node_modules` at `/node_modules` too, where ES-module imports look), `PYTHONPATH` or
//!    `NODE_PATH` pointing into it, and the network the request asked for (none by default).

mod shadow;

pub use shadow::binary_incompatibility;

use crate::outcome::{DependencyReport, Outcome, ShadowedDistribution, Status};
use crate::profile::{PackagesConfig, Profile};
use crate::spec::{Bind, Export, InputFile, Limits, ParseError, Rootfs, SandboxSpec, StdinSource};
use sha2::{Digest, Sha256};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the set is bound inside both sandboxes.
pub const DEPS_DIR: &str = "/deps";
/// At most this many packages per request, each at most this long.
pub const MAX_PACKAGES: usize = 100;
pub const MAX_PACKAGE_LEN: usize = 200;
/// Temp directories of crashed installs older than this are removed.
const STALE_TEMP_SECS: u64 = 24 * 3600;
/// Installed sets kept; beyond it the least recently used are removed after an install...
pub const MAX_SETS: usize = 32;
/// ...but never one used within this time (a run may still have it bound).
const EVICT_MIN_IDLE_SECS: u64 = 3600;

#[derive(Debug, thiserror::Error)]
pub enum DepsError {
    #[error(
        "--packages: the {0} profile has no [packages] section: cordon does not know how to install packages for it (see profiles/README.md)"
    )]
    Unsupported(String),
    #[error("--packages: {0}")]
    Invalid(String),
    #[error("cannot use the dependency cache {path}: {reason}")]
    Cache { path: PathBuf, reason: String },
}

fn cache_err(path: &Path, reason: impl std::fmt::Display) -> DepsError {
    DepsError::Cache {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// The allow-list entry for an index URL: `http(s)://HOST[:PORT]/...` → `HOST:PORT`.
pub fn index_host(url: &str) -> Result<crate::net::policy::Entry, String> {
    let (rest, default_port) = if let Some(r) = url.strip_prefix("https://") {
        (r, 443)
    } else if let Some(r) = url.strip_prefix("http://") {
        (r, 80)
    } else {
        return Err(format!("{url:?} must start with http:// or https://"));
    };
    let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
    if auth.is_empty() || auth.contains('@') {
        return Err(format!("{url:?} must name a host (without credentials)"));
    }
    let mut e = crate::net::policy::parse_entry(auth).map_err(|e| e.reason)?;
    if let crate::net::policy::HostPattern::Below(_) = e.host {
        return Err(format!(
            "{url:?}: an index URL names one host, not a wildcard"
        ));
    }
    if e.port.is_none() {
        e.port = Some(default_port);
    }
    Ok(e)
}

/// Checks the package names: no option-like, empty, blank-holding or over-long entries.
pub fn check_packages(pkgs: &[String]) -> Result<Vec<String>, DepsError> {
    if pkgs.len() > MAX_PACKAGES {
        return Err(DepsError::Invalid(format!(
            "at most {MAX_PACKAGES} packages"
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for p in pkgs {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        if p.starts_with('-')
            || p.len() > MAX_PACKAGE_LEN
            || p.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(DepsError::Invalid(format!(
                "{p:?} is not a package name or requirement (no leading `-`, no blanks, at most {MAX_PACKAGE_LEN} bytes)"
            )));
        }
        out.push(p.to_string());
    }
    if out.is_empty() {
        return Err(DepsError::Invalid("the package list is empty".into()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// How one installer is driven.
struct Installer {
    /// The program whose identity goes into the key (the interpreter the set is built for).
    interpreter: &'static str,
    /// The run's environment variable pointing into the set, and where.
    path_var: (&'static str, &'static str),
}

fn installer(name: &str) -> Installer {
    match name {
        "npm" => Installer {
            interpreter: "node",
            path_var: ("NODE_PATH", "/deps/node/node_modules"),
        },
        _ => Installer {
            interpreter: "python3",
            path_var: ("PYTHONPATH", "/deps/python"),
        },
    }
}

/// Where a lock file goes in the set's directory (as the install sandbox sees it, under /deps),
/// and for npm the package.json that `npm ci` wants beside it, made from the lock's root entry.
fn lock_files(
    installer: &str,
    text: &[u8],
    pkgs: &[String],
) -> Result<Vec<(&'static str, Vec<u8>)>, DepsError> {
    if text.len() > MAX_LOCK {
        return Err(DepsError::Invalid(format!(
            "the lock file is larger than {} KiB",
            MAX_LOCK >> 10
        )));
    }
    if installer != "npm" {
        if std::str::from_utf8(text).is_err() {
            return Err(DepsError::Invalid(
                "the lock file (a pip requirements file) is not UTF-8 text".into(),
            ));
        }
        return Ok(vec![(PIP_LOCK, text.to_vec())]);
    }
    if !pkgs.is_empty() {
        return Err(DepsError::Invalid(
            "with a package-lock.json, npm installs exactly the lock (`npm ci`): drop --packages / packages".into(),
        ));
    }
    let lock: serde_json::Value = serde_json::from_slice(text).map_err(|e| {
        DepsError::Invalid(format!("the lock file is not a package-lock.json: {e}"))
    })?;
    let root = &lock["packages"][""];
    if !root.is_object() {
        return Err(DepsError::Invalid(
            "the package-lock.json has no `packages[\"\"]` entry (lockfileVersion 2 or 3 is needed: `npm install --package-lock-only` writes one)".into(),
        ));
    }
    let mut manifest =
        serde_json::json!({"name": "cordon-deps", "version": "0.0.0", "private": true});
    for key in ["dependencies", "optionalDependencies"] {
        if let Some(d) = root.get(key) {
            manifest[key] = d.clone();
        }
    }
    let manifest = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    Ok(vec![
        ("node/package-lock.json", text.to_vec()),
        ("node/package.json", manifest),
    ])
}

/// Largest lock file accepted.
const MAX_LOCK: usize = 4 << 20;
/// The installer's TMPDIR, relative to the set's directory (so on the install's tmpfs);
/// removed before the set is published.
const INSTALL_TMP: &str = ".tmp";
/// Where pip's lock (a requirements file) goes, relative to the set's directory.
const PIP_LOCK: &str = "requirements.lock";

fn install_argv(cfg: &PackagesConfig, index: &str, pkgs: &[String], locked: bool) -> Vec<String> {
    if locked && cfg.installer == "npm" {
        return [
            "npm",
            "ci",
            "--prefix",
            "/deps/node",
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--loglevel",
            "error",
            "--registry",
            index,
        ]
        .map(String::from)
        .to_vec();
    }
    let mut argv: Vec<String> = match cfg.installer.as_str() {
        "npm" => [
            "npm",
            "install",
            "--prefix",
            "/deps/node",
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--no-package-lock",
            "--loglevel",
            "error",
            "--registry",
            index,
        ]
        .map(String::from)
        .to_vec(),
        _ => [
            "python3",
            "-m",
            "pip",
            "install",
            "--target",
            "/deps/python",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            "--no-warn-script-location",
            "--index-url",
            index,
        ]
        .map(String::from)
        .to_vec(),
    };
    if locked {
        argv.extend(["-r".to_string(), format!("{DEPS_DIR}/{PIP_LOCK}")]);
    }
    if cfg.installer != "npm" {
        argv.push("--".into());
    }
    argv.extend(pkgs.iter().cloned());
    argv
}

/// cordon's defaults for an install sandbox (before `[packages.limits]`).
fn install_limits() -> Limits {
    Limits {
        wall: std::time::Duration::from_secs(300),
        memory: Some(1 << 30),
        pids: Some(256),
        file_size: Some(1 << 30),
        workspace_size: 1 << 30,
        workspace_inodes: 256 * 1024,
        tmp_size: 256 << 20,
        tmp_inodes: 64 * 1024,
        ..Limits::default()
    }
}

/// The dependency cache directory: next to the compile cache (`.../cordon/deps`), private.
fn cache_dir() -> Result<PathBuf, DepsError> {
    let compile = crate::cache::Cache::default_dir();
    let dir = compile
        .parent()
        .map(|p| p.join("deps"))
        .unwrap_or_else(|| compile.join("deps"));
    // The real path, so that what is checked is what gets bound: a planted set would run
    // as the caller's code.
    crate::cache::private_dir(&dir).map_err(|e| cache_err(&dir, e))
}

/// Removes a set or a failed install's directory, best effort. The install's code may have
/// left directories without write or search permission for their owner (mode 0000), which
/// `remove_dir_all` cannot empty as an unprivileged caller: those are given back `u+rwx`
/// first (real directories only, never through a symlink; nothing of the install runs any
/// more).
fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    fn open_up(dir: &Path, depth: usize) {
        // A path of n levels takes at least 2n bytes: none deeper fits in PATH_MAX. (The
        // install may have nested far past MAX_SET_DEPTH; that set is refused, and must go.)
        if depth > libc::PATH_MAX as usize / 2 {
            return;
        }
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&e.path(), depth + 1);
            }
        }
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        open_up(path, 0);
    }
    let _ = std::fs::remove_dir_all(path);
}

/// Removes temp directories (and shadow reports' temp files) that crashes left behind, and
/// shadow reports whose set is gone.
fn sweep(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        // A shadow report whose set is gone (removed by hand, or by an eviction that was cut
        // short).
        let text = name.to_string_lossy();
        if let Some(set) = text.strip_suffix(".shadowed")
            && !text.starts_with(".tmp-")
            && !dir.join(set).is_dir()
        {
            let _ = std::fs::remove_file(e.path());
            continue;
        }
        if !name.to_string_lossy().starts_with(".tmp-") {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > STALE_TEMP_SECS);
        if old {
            match e.file_type() {
                // A shadow report's temp file (deps::shadow::find_cached).
                Ok(t) if t.is_file() => {
                    let _ = std::fs::remove_file(e.path());
                }
                _ => remove_tree(&e.path()),
            }
        }
    }
}

/// What the program's run needs from the installed set.
pub struct Ready {
    /// The set at `/deps`, and for npm its `node_modules` at `/node_modules` too.
    pub binds: Vec<Bind>,
    pub env: (String, String),
    pub report: DependencyReport,
}

/// Where an npm set's `node_modules` is bound as well: ES-module `import` ignores `NODE_PATH`
/// and looks for a package only in the `node_modules` directories above the importing file
/// (`/workspace/node_modules`, then `/node_modules`), as `require()` also does.
pub const NODE_MODULES_DIR: &str = "/node_modules";

/// The binds and the environment variable that show the published set `set` to the run.
/// An npm set's `node/node_modules` (a real directory, not a symlink the install made) is
/// also bound at [`NODE_MODULES_DIR`], unless the root filesystem has a `/node_modules` of
/// its own, which the bind would hide; `NODE_PATH` then names that same directory, so that
/// `require()` and `import` load a package from one path (two paths would load it twice).
fn ready_binds(
    installer: &Installer,
    set: PathBuf,
    rootfs: &Rootfs,
) -> (Vec<Bind>, (String, String)) {
    let mut env = (
        installer.path_var.0.to_string(),
        installer.path_var.1.to_string(),
    );
    let mut binds = Vec::new();
    if installer.interpreter == "node" {
        let modules = set.join("node/node_modules");
        let real_dir = std::fs::symlink_metadata(&modules).is_ok_and(|m| m.is_dir());
        let rootfs_has_one = match rootfs {
            Rootfs::Host => false,
            Rootfs::Dir(d) => std::fs::symlink_metadata(d.join(&NODE_MODULES_DIR[1..])).is_ok(),
        };
        if real_dir && !rootfs_has_one {
            binds.push(Bind {
                src: modules,
                dst: NODE_MODULES_DIR.into(),
                writable: false,
            });
            env.1 = NODE_MODULES_DIR.into();
        }
    }
    binds.insert(
        0,
        Bind {
            src: set,
            dst: DEPS_DIR.into(),
            writable: false,
        },
    );
    (binds, env)
}

/// The outcome of [`prepare`].
pub enum Prepared {
    Ready(Box<Ready>),
    /// The install failed: this is the run's outcome (status `dependency_error`).
    Failed(Box<Outcome>),
}

/// Finds the set in the cache or installs it. `base` is a spec with the run's rootfs,
/// seccomp policy, degrade/backend choices and limit naming (a request's or the flags');
/// `identity` names the interpreter as the sandbox sees it.
pub fn prepare(
    profile: &Profile,
    packages: &[String],
    lock: Option<&[u8]>,
    index_override: Option<&str>,
    rootfs: &Rootfs,
    base: &SandboxSpec,
    identity: &dyn Fn(&str) -> String,
) -> Result<Prepared, crate::run::RunError> {
    let cfg = profile
        .packages
        .as_ref()
        .ok_or_else(|| DepsError::Unsupported(profile.name.clone()))?;
    let request = matches!(
        base.limit_naming,
        crate::spec::LimitNaming::Request | crate::spec::LimitNaming::CompileRequest
    );
    let pkgs = match lock {
        Some(_) if packages.is_empty() => Vec::new(),
        _ => check_packages(packages)?,
    };
    let lock_files = match lock {
        Some(text) => lock_files(&cfg.installer, text, &pkgs)?,
        None => Vec::new(),
    };
    let inst = installer(&cfg.installer);
    let index = index_override.unwrap_or(&cfg.index).to_string();
    let index_entry =
        index_host(&index).map_err(|e| DepsError::Invalid(format!("--package-index: {e}")))?;
    let mut entries = Vec::new();
    if index_override.is_none() {
        for h in &cfg.hosts {
            entries.push(
                crate::net::policy::parse_entry(h)
                    .map_err(|e| DepsError::Invalid(e.to_string()))?,
            );
        }
    }
    // The index's own host, unless the profile's hosts already admit it.
    let covered = {
        use crate::net::policy::{HostPattern, Target};
        let list = crate::net::AllowList {
            entries: entries.clone(),
            ..Default::default()
        };
        let target = match &index_entry.host {
            HostPattern::Exact(n) => Some(Target::Name(n.clone())),
            HostPattern::Ip(ip) => Some(Target::Ip(*ip)),
            HostPattern::Below(_) => None,
        };
        target.is_some_and(|t| list.admit(&t, index_entry.port.unwrap_or(443)).is_ok())
    };
    if !covered {
        entries.insert(0, index_entry);
    }

    let mut h = Sha256::new();
    for part in [
        "cordon-deps-v3".to_string(),
        cfg.installer.clone(),
        pkgs.join("\n"),
        index.clone(),
        identity(inst.interpreter),
        format!("{rootfs:?}"),
        match lock {
            Some(text) => format!(
                "lock {}",
                Sha256::digest(text)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ),
            None => "no lock".to_string(),
        },
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let dir = cache_dir()?;
    let final_dir = dir.join(&key);
    let report = |cached: bool| DependencyReport {
        installer: cfg.installer.clone(),
        packages: pkgs.clone(),
        cached,
        status: Status::Ok,
        output: String::new(),
        error: String::new(),
        execution_time: 0.0,
        memory_used: None,
        network: None,
        shadowed: Vec::new(),
    };
    if final_dir.is_dir() {
        // The set's mtime is its last use, for eviction (best effort).
        if let Ok(d) = std::fs::File::open(&final_dir) {
            let _ = d.set_modified(std::time::SystemTime::now());
        }
        let mut rep = report(true);
        note_shadowed(&mut rep, &final_dir, rootfs, request);
        let (binds, env) = ready_binds(&inst, final_dir, rootfs);
        return Ok(Prepared::Ready(Box::new(Ready {
            binds,
            env,
            report: rep,
        })));
    }
    sweep(&dir);

    // A fresh directory the install sandbox's user can write.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let temp = dir.join(format!(".tmp-{}-{nanos}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&temp)
        .map_err(|e| cache_err(&temp, e))?;
    let _ = std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o755));
    // A root caller's install runs as the sandbox's own host ids, which must be able to write.
    let own_ids = match crate::launch::host_ids() {
        Ok(crate::launch::HostIds::Own { uid, gid, .. }) => Some((uid, gid)),
        _ => None,
    };
    if let Some((uid, gid)) = own_ids {
        std::os::unix::fs::chown(&temp, Some(uid), Some(gid)).map_err(|e| cache_err(&temp, e))?;
    }
    let cleanup = |e: crate::run::RunError| {
        remove_tree(&temp);
        e
    };

    let mut s = base.clone();
    s.argv = install_argv(cfg, &index, &pkgs, !lock_files.is_empty());
    s.env = vec![
        // The installer's temporary files (pip's downloads, and the tree `pip --target`
        // builds before it moves it into place) go to the tmpfs the set is installed into:
        // one cap (the workspace size) bounds the whole install, a set larger than /tmp
        // installs, and the final move is a rename, not a second copy of the set.
        ("TMPDIR".into(), format!("{DEPS_DIR}/{INSTALL_TMP}")),
        ("PIP_BREAK_SYSTEM_PACKAGES".into(), "1".into()),
        // Node.js trusts its own bundled CAs only; the system's (bound at /etc/ssl/certs)
        // include the ones the host's administrator added, as pip's do.
        (
            "NODE_EXTRA_CA_CERTS".into(),
            "/etc/ssl/certs/ca-certificates.crt".into(),
        ),
    ];
    s.limits = install_limits();
    cfg.limits
        .apply(&mut s.limits)
        .map_err(|e: ParseError| cleanup(e.into()))?;
    // A limit the install reaches is raised in the profile, not with the run's flags.
    s.limit_naming = crate::spec::LimitNaming::Packages;
    s.stdin = StdinSource::Null;
    s.passthrough = false;
    s.files = Vec::new();
    s.collect = None;
    s.network = crate::net::Network::Allow(crate::net::AllowList {
        entries,
        overrides: Vec::new(),
        log: false,
    });
    // The installer writes into a tmpfs of the install sandbox's own, as large as its
    // workspace (`[packages.limits]`), which init copies into `temp` once the installer has
    // exited 0: what it writes is bounded by the tmpfs, where a writable bind of `temp` let
    // it fill the host's disk for as long as the install ran. The lock (and for npm the
    // package.json derived from it) is seeded where the installer reads it, in the set's own
    // directory: it also records what the set was built from.
    s.binds = Vec::new();
    s.export = Some(Export {
        dir: DEPS_DIR.into(),
        host: temp.clone(),
        seed: lock_files
            .iter()
            .map(|(rel, contents)| InputFile {
                path: rel.to_string(),
                contents: contents.clone(),
                mode: 0o644,
            })
            .chain([InputFile {
                path: format!("{INSTALL_TMP}/README"),
                contents:
                    b"The installer's TMPDIR; cordon removes it before it publishes the set.\n"
                        .to_vec(),
                mode: 0o644,
            }])
            .collect(),
    });
    let out = crate::launch::run(&s).map_err(|e| cleanup(e.into()))?;
    let rep = DependencyReport {
        installer: cfg.installer.clone(),
        packages: pkgs.clone(),
        cached: false,
        status: out.status,
        output: out.output.clone(),
        error: out.error.clone(),
        execution_time: out.execution_time,
        memory_used: out.memory_used,
        network: out.network.clone(),
        shadowed: Vec::new(),
    };
    if out.status != Status::Ok {
        remove_tree(&temp);
        let message = install_failure_message(&cfg.installer, &InstallEnd::of(&out), &s.limits);
        return Ok(install_failed(out, rep, message));
    }
    // The installer's temporary directory is no part of the set (pip empties it; whatever a
    // build left there goes). Not followed if the install made it a symlink.
    remove_tree(&temp.join(INSTALL_TMP));
    let tmp_left = std::fs::symlink_metadata(temp.join(INSTALL_TMP)).is_ok();
    // The set is made fit to publish (special files and outward symlinks removed, modes
    // stripped, a size cap), and a root caller's install, which wrote as the sandbox's own
    // host uid, is handed to root (later runs read it through the "other" permission bits).
    let mut rep = rep;
    if tmp_left {
        rep.error.push_str(&format!(
            "\ncordon could not remove the installer's temporary directory {DEPS_DIR}/{INSTALL_TMP} from the set: it is part of the set, read-only, as the packages are\n"
        ));
    }
    match settle_tree(&temp, own_ids.is_some(), MAX_SET_BYTES) {
        Ok(settled) => {
            if !settled.removed.is_empty() {
                let n = settled.removed.len();
                let shown: Vec<&str> = settled.removed.iter().take(5).map(String::as_str).collect();
                rep.error.push_str(&format!(
                    "\ncordon removed {n} special file(s) or symlink(s) leading out of the set from the installed packages: {}{}\n",
                    shown.join(", "),
                    if n > 5 { ", ..." } else { "" }
                ));
            }
        }
        Err(why) => {
            remove_tree(&temp);
            let message = format!(
                "the installed packages cannot be used: {why}; cordon keeps at most {} GiB and {MAX_SET_DEPTH} directory levels per set",
                MAX_SET_BYTES >> 30
            );
            return Ok(install_failed(out, rep, message));
        }
    }
    if cfg.installer == "pip" {
        let python = temp.join("python");
        let joined = join_shadowed_namespaces(&python, &python_site_dirs(rootfs));
        if !joined.is_empty() {
            rep.error.push_str(&format!(
                "\ncordon made {} regular package(s) that also reach into the root filesystem's own (whose regular package of that name would otherwise hide the installed one): {}\n",
                joined.len(),
                joined.join(", ")
            ));
            if !write_sitecustomize(&python, &joined) {
                rep.error.push_str(
                    "cordon could not add its sitecustomize.py (the set has one of its own): a .pth file of the root filesystem that imports these packages at start-up still hides them\n",
                );
            }
        }
    }
    // Publish atomically; a concurrent install of the same key that got there first wins.
    if let Err(e) = std::fs::rename(&temp, &final_dir) {
        remove_tree(&temp);
        if !final_dir.is_dir() {
            return Err(
                cache_err(&final_dir, format!("cannot publish the installed set: {e}")).into(),
            );
        }
    }
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    evict(&dir, &key);
    note_shadowed(&mut rep, &final_dir, rootfs, request);
    let (binds, env) = ready_binds(&inst, final_dir, rootfs);
    Ok(Prepared::Ready(Box::new(Ready {
        binds,
        env,
        report: rep,
    })))
}

/// Records in `rep` the root filesystem's distributions that a pip set (at `set`) shadows at
/// another version ([`shadow::find`]), with a sentence in `dependencies.error` for each one
/// whose dependents in the root filesystem now meet a version they were not built for.
/// `request`: the run came as a JSON request (its fields are named, not the flags).
fn note_shadowed(rep: &mut DependencyReport, set: &Path, rootfs: &Rootfs, request: bool) {
    if rep.installer != "pip" {
        return;
    }
    let root = match rootfs {
        Rootfs::Host => PathBuf::from("/"),
        Rootfs::Dir(d) => d.clone(),
    };
    rep.shadowed = shadow::find_cached(
        &shadow_cache(set),
        &set.join("python"),
        &root,
        &python_site_dirs(rootfs),
    );
    if rep.shadowed.is_empty() {
        return;
    }
    let option = if request { "`packages`" } else { "--packages" };
    let mut text = String::new();
    let (risky, others): (Vec<_>, Vec<_>) =
        rep.shadowed.iter().partition(|s| !s.dependents.is_empty());
    for s in &risky {
        text.push_str(&format!(
            "\n{} {} from {option} shadows the root filesystem's {} {}; {}\n",
            s.name,
            s.version,
            s.name,
            s.rootfs_version,
            shadow_remedy(s, option)
        ));
    }
    if !others.is_empty() {
        let list: Vec<String> = others
            .iter()
            .map(|s| format!("{} {} with {}", s.name, s.rootfs_version, s.version))
            .collect();
        text.push_str(&format!(
            "\nthe set also replaces the root filesystem's {} (no package of the root filesystem still in use depends on them)\n",
            list.join(", ")
        ));
    }
    if rep.error.is_empty() {
        rep.error = text.trim_start().to_string();
    } else {
        if !rep.error.ends_with('\n') {
            rep.error.push('\n');
        }
        rep.error.push_str(&text);
    }
}

/// What the root filesystem's dependents of a shadowed distribution risk, and the two ways
/// out: install them too (pip then picks versions built for the set's), or pin the
/// distribution to the root filesystem's version (which also holds when it came into the
/// set as another package's dependency).
fn shadow_remedy(s: &ShadowedDistribution, option: &str) -> String {
    const SHOWN: usize = 8;
    let mut names = s
        .dependents
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if s.dependents.len() > SHOWN {
        names.push_str(&format!(" and {} more", s.dependents.len() - SHOWN));
    }
    let pin = format!("{}=={}", s.name, public_version(&s.rootfs_version));
    format!(
        "the root filesystem's packages that depend on it ({names}) now get {} instead of the version they were built with, and may fail to import (a compiled module with \"binary incompatibility\"): add the ones the program imports to {option} too (pip then installs versions that fit), or pin `{pin}` in {option}",
        s.version
    )
}

/// A version without its local part (`4.0.2+dfsg`: `4.0.2`), as PyPI knows it.
fn public_version(v: &str) -> &str {
    v.split('+').next().unwrap_or(v)
}

/// The directories of the root filesystem's Python packages (Debian's `dist-packages`), as
/// seen from the host.
fn python_site_dirs(rootfs: &Rootfs) -> Vec<PathBuf> {
    let root = match rootfs {
        Rootfs::Host => PathBuf::from("/"),
        Rootfs::Dir(d) => d.clone(),
    };
    let mut dirs = vec![root.join("usr/lib/python3/dist-packages")];
    for base in ["usr/local/lib", "usr/lib"] {
        if let Ok(rd) = std::fs::read_dir(root.join(base)) {
            let mut found: Vec<PathBuf> = rd
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("python3."))
                .map(|e| e.path().join("dist-packages"))
                .collect();
            found.sort();
            dirs.extend(found);
        }
    }
    dirs
}

/// What cordon writes into an installed namespace package that a regular package of the root
/// filesystem would otherwise hide: Python takes a regular package (one with `__init__.py`)
/// anywhere on the path over namespace portions earlier on it, so pip's `mpl_toolkits`
/// (a namespace package since matplotlib 3.7) lost to Debian's older one and imported
/// modules that do not fit the installed matplotlib. As a regular package first on the path
/// it wins, and `extend_path` still reaches the root filesystem's modules of that name that
/// the set lacks.
const NAMESPACE_INIT: &str = "# Written by cordon (--packages): the root filesystem's regular package of this name\n# would otherwise hide this installed namespace package.\n__path__ = __import__(\"pkgutil\").extend_path(__path__, __name__)\n";

/// Gives each top-level namespace package of `python_dir` (a directory without
/// `__init__.py`, not a symlink) that a regular package of the same name in one of
/// `site_dirs` would hide an `__init__.py` ([`NAMESPACE_INIT`]); returns their names. Runs
/// on a settled set (nothing of the install runs, no symlink leads out): the file is made
/// new, never through a symlink.
fn join_shadowed_namespaces(python_dir: &Path, site_dirs: &[PathBuf]) -> Vec<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(rd) = std::fs::read_dir(python_dir) else {
        return Vec::new();
    };
    let mut joined = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let identifier = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let init = e.path().join("__init__.py");
        if !is_dir || !identifier || std::fs::symlink_metadata(&init).is_ok() {
            continue;
        }
        if !site_dirs
            .iter()
            .any(|d| d.join(&name).join("__init__.py").is_file())
        {
            continue;
        }
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&init)
            .and_then(|mut f| std::io::Write::write_all(&mut f, NAMESPACE_INIT.as_bytes()));
        if written.is_ok() {
            joined.push(name);
        }
    }
    joined.sort();
    joined
}

/// A `sitecustomize.py` for a set with [`join_shadowed_namespaces`]'s packages, unless the
/// set has one: a setuptools `*-nspkg.pth` file of the root filesystem (Debian's matplotlib
/// has one for `mpl_toolkits`) puts its namespace package in `sys.modules` at start-up, before
/// any import looks at the path; `site` imports sitecustomize after every `.pth` file, and
/// this one forgets those modules, so that the import finds the set's package. It then runs
/// the root filesystem's own sitecustomize, which it stands in front of.
fn write_sitecustomize(python_dir: &Path, names: &[String]) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let list: String = names.iter().map(|n| format!("{n:?}, ")).collect();
    let text = format!(
        "# Written by cordon (--packages): forgets the root filesystem's namespace packages that a\n\
         # .pth file imported at start-up, so that this set's own are found, then runs the root\n\
         # filesystem's sitecustomize.\n\
         import importlib.machinery, os, sys\n\
         for _name in ({list}):\n    sys.modules.pop(_name, None)\n\
         _here = os.path.dirname(os.path.abspath(__file__))\n\
         _spec = importlib.machinery.PathFinder.find_spec(\n    \"sitecustomize\", [p for p in sys.path if os.path.abspath(p or \".\") != _here]\n)\n\
         if _spec is not None and _spec.loader is not None:\n    _spec.loader.exec_module(sys.modules[__name__])\n"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(python_dir.join("sitecustomize.py"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .is_ok()
}

/// How the install sandbox ended, as far as its failure's message needs.
struct InstallEnd<'a> {
    status: Status,
    exit_code: Option<i32>,
    signal: Option<i32>,
    /// The install sandbox's own account (a limit reached, a full filesystem, ...).
    message: Option<&'a str>,
    /// The installer's stderr and stdout.
    error: &'a str,
    output: &'a str,
}

impl<'a> InstallEnd<'a> {
    fn of(out: &'a Outcome) -> Self {
        InstallEnd {
            status: out.status,
            exit_code: out.exit_code,
            signal: out.signal,
            message: out.message.as_deref(),
            error: &out.error,
            output: &out.output,
        }
    }
}

/// Why an install failed, for the run's message: how the installer ended, the install
/// sandbox's own account (a limit reached, a full filesystem, cordon's failure), and where
/// the installer's messages are.
fn install_failure_message(installer: &str, end: &InstallEnd, limits: &Limits) -> String {
    let mut why = Vec::new();
    match (end.status, end.exit_code, end.signal) {
        // Not found or not executable: the message says which (no code of the installer's).
        (Status::RuntimeError, Some(126 | 127), _) if end.message.is_some() => {
            why.push(format!("{installer} could not be started"))
        }
        (Status::RuntimeError, Some(code), _) => {
            why.push(format!("{installer} exited with code {code}"))
        }
        (Status::Signaled, _, Some(sig)) => why.push(format!(
            "{installer} was killed by {}",
            crate::outcome::signal_name(sig)
        )),
        _ => {}
    }
    why.extend(end.message.map(String::from));
    // A filesystem the sandbox found full when the installer exited is named in its message
    // already. pip removes its temporary files, and npm what it had installed, before they
    // exit, though, so after their ENOSPC nothing is full any more: then the one they write is
    // named, /deps (the set and TMPDIR).
    let full_named = end
        .message
        .is_some_and(|m| m.contains("No space left on device"));
    let enospc = [end.error, end.output]
        .iter()
        .any(|t| t.contains("No space left on device") || t.contains("ENOSPC"));
    if enospc && !full_named && end.status == Status::RuntimeError {
        why.push(format!(
            "it ran out of space (ENOSPC, \"No space left on device\") and had freed that space again by the time it exited; it writes the set and its temporary files (TMPDIR) into {DEPS_DIR}, a tmpfs of {}: raise workspace_size in the profile's [packages.limits] (and memory there: the files count toward the install's memory limit{}); a build that writes to /tmp instead has {} (tmp_size there)",
            size_text(limits.workspace_size),
            limits
                .memory
                .map(|m| format!(" of {}", size_text(m)))
                .unwrap_or_default(),
            size_text(limits.tmp_size),
        ));
    }
    if why.is_empty() {
        why.push(format!(
            "the install sandbox ended with status {}",
            end.status.as_str()
        ));
    }
    if end.error.contains("No module named pip") {
        why.push("this python has no pip: on --rootfs host `apt-get install python3-pip`, or rebuild the python rootfs (`cordon rootfs build python`)".into());
    }
    format!(
        "installing the packages failed: {}; {installer}'s messages are in `dependencies.error` (on stderr without --json)",
        why.join("; ")
    )
}

/// A size for messages: whole GiB or MiB.
fn size_text(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else {
        format!("{} MiB", b.div_ceil(1 << 20))
    }
}

/// The result of a run whose packages could not be installed: the code did not run.
fn install_failed(out: Outcome, rep: DependencyReport, message: String) -> Prepared {
    let mut failed = out;
    failed.message = Some(message);
    failed.status = Status::DependencyError;
    failed.success = false;
    failed.cli_exit_code = 1;
    failed.files = Some(Vec::new());
    failed.directories.clear();
    failed.files_omitted.clear();
    failed.output = String::new();
    failed.error = String::new();
    failed.output_bytes = None;
    failed.error_bytes = None;
    failed.dependencies = Some(rep);
    Prepared::Failed(Box::new(failed))
}

/// Where the shadow report of the set at `set` is kept: beside it (`KEY.shadowed`), not in it,
/// since the set is what the sandbox sees at /deps.
fn shadow_cache(set: &Path) -> PathBuf {
    set.with_extension("shadowed")
}

/// Keeps at most [`MAX_SETS`] sets: removes the least recently used ones (not `keep`, and none
/// used within the last hour). A set is first renamed away, so no new run picks it up while
/// it is being removed.
fn evict(dir: &Path, keep: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut sets: Vec<(std::time::SystemTime, PathBuf)> = rd
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.len() == 64 && n != keep && n.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if sets.len() < MAX_SETS {
        return;
    }
    sets.sort();
    let excess = sets.len() + 1 - MAX_SETS;
    for (used, path) in sets.into_iter().take(excess) {
        let idle = used.elapsed().map(|d| d.as_secs()).unwrap_or(0);
        if idle < EVICT_MIN_IDLE_SECS {
            continue;
        }
        let trash = dir.join(format!(
            ".tmp-evict-{}-{}",
            std::process::id(),
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        if std::fs::rename(&path, &trash).is_ok() {
            remove_tree(&trash);
            let _ = std::fs::remove_file(shadow_cache(&path));
        }
    }
}

/// The most disk space an installed set may take; a larger one is refused, not published.
pub const MAX_SET_BYTES: u64 = 4 << 30;
/// The deepest directory nesting an installed set may have.
const MAX_SET_DEPTH: usize = 128;

/// An installed set made fit to publish.
#[derive(Debug, Default)]
struct Settled {
    /// Disk space of its files (allocated blocks: a sparse file counts what it holds).
    bytes: u64,
    /// What was removed: special files and symlinks that lead out of the set.
    removed: Vec<String>,
    /// The cap on `bytes` ([`MAX_SET_BYTES`]).
    max_bytes: u64,
}

/// Makes an installed set fit to publish, before anything else sees it: the install ran code
/// from the packages, which may have left anything behind. Regular files and directories stay,
/// without setuid, setgid, sticky or group/other write bits; symlinks stay when they are
/// relative and lead nowhere above the set (`..` only at their start, no more of them than
/// the link is deep); FIFOs, sockets and device nodes are removed. For a root caller
/// everything is handed to root (the install wrote as the sandbox's host uid). A set over
/// [`MAX_SET_BYTES`] or deeper than [`MAX_SET_DEPTH`] is refused. Nothing is followed: the
/// install's processes are all gone, so the tree holds still.
fn settle_tree(top: &Path, to_root: bool, max_bytes: u64) -> Result<Settled, String> {
    let mut st = Settled {
        max_bytes,
        ..Settled::default()
    };
    settle_dir(top, top, 0, to_root, &mut st)?;
    settle_entry(
        top,
        &std::fs::symlink_metadata(top).map_err(|e| e.to_string())?,
        to_root,
    )?;
    Ok(st)
}

fn settle_dir(
    top: &Path,
    dir: &Path,
    depth: usize,
    to_root: bool,
    st: &mut Settled,
) -> Result<(), String> {
    let rel = |p: &Path| {
        p.strip_prefix(top)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", rel(dir)))?;
    for e in rd {
        let e = e.map_err(|e| format!("{}: {e}", rel(dir)))?;
        let path = e.path();
        let m = std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
        let ft = m.file_type();
        if ft.is_dir() {
            if depth + 1 > MAX_SET_DEPTH {
                return Err(format!(
                    "{}: directories nested deeper than {MAX_SET_DEPTH} levels",
                    rel(&path)
                ));
            }
            settle_dir(top, &path, depth + 1, to_root, st)?;
        } else if ft.is_file() {
            st.bytes += m.blocks() * 512;
            if st.bytes > st.max_bytes {
                return Err(format!(
                    "the installed packages take more than {} MiB of disk",
                    st.max_bytes >> 20
                ));
            }
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
            if !link_stays_inside(&target, depth) {
                std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
                st.removed
                    .push(format!("{} -> {}", rel(&path), target.display()));
                continue;
            }
        } else {
            std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
            st.removed.push(rel(&path));
            continue;
        }
        settle_entry(&path, &m, to_root).map_err(|e| format!("{}: {e}", rel(&path)))?;
    }
    Ok(())
}

/// Strips a file's or directory's mode to at most 0755, and hands it to root when asked.
fn settle_entry(path: &Path, m: &std::fs::Metadata, to_root: bool) -> Result<(), String> {
    if to_root {
        std::os::unix::fs::lchown(path, Some(0), Some(0)).map_err(|e| e.to_string())?;
    }
    if !m.file_type().is_symlink() {
        let mode = m.mode() & 0o7777;
        if mode & !0o755 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o755))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Whether a symlink `depth` directories below the set's top, pointing at `target`, resolves
/// inside the set: relative, with `..` only at its start (each one then climbs a real
/// directory of the set) and no more of them than `depth`.
fn link_stays_inside(target: &Path, depth: usize) -> bool {
    use std::path::Component;
    let mut ups = 0;
    let mut descended = false;
    for c in target.components() {
        match c {
            Component::ParentDir if !descended => ups += 1,
            Component::Normal(_) => descended = true,
            Component::CurDir => {}
            _ => return false,
        }
    }
    ups <= depth
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a hostile install can leave is made harmless before the set is published:
    /// special files and outward symlinks go, setuid and world-writable bits are stripped,
    /// inward symlinks (node's `.bin` links) and ordinary files stay.
    #[test]
    fn an_installed_set_is_settled_before_it_is_published() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("set");
        std::fs::create_dir_all(top.join("pkg/bin")).unwrap();
        std::fs::create_dir_all(top.join(".bin")).unwrap();
        std::fs::write(top.join("pkg/bin/cli.js"), "x").unwrap();
        std::fs::write(top.join("pkg/suid"), "x").unwrap();
        std::fs::set_permissions(
            top.join("pkg/suid"),
            std::fs::Permissions::from_mode(0o6777),
        )
        .unwrap();
        std::fs::create_dir(top.join("pkg/shared")).unwrap();
        std::fs::set_permissions(
            top.join("pkg/shared"),
            std::fs::Permissions::from_mode(0o1777),
        )
        .unwrap();
        symlink("../pkg/bin/cli.js", top.join(".bin/cli")).unwrap();
        symlink("/etc/shadow", top.join("pkg/shadow")).unwrap();
        symlink("../../x", top.join("pkg/up")).unwrap();
        symlink("bin/../../../x", top.join("pkg/sneaky")).unwrap();
        nix::unistd::mkfifo(
            &top.join("pkg/fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let sock = std::os::unix::net::UnixListener::bind(top.join("sock")).unwrap();
        drop(sock);

        let settled = settle_tree(&top, false, MAX_SET_BYTES).unwrap();
        let mut removed = settled.removed.clone();
        removed.sort();
        assert_eq!(
            removed,
            [
                "pkg/fifo",
                "pkg/shadow -> /etc/shadow",
                "pkg/sneaky -> bin/../../../x",
                "pkg/up -> ../../x",
                "sock"
            ]
        );
        assert!(settled.bytes > 0);
        let mode = |p: &str| std::fs::symlink_metadata(top.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("pkg/suid"), 0o755);
        assert_eq!(mode("pkg/shared"), 0o755);
        assert_eq!(
            std::fs::read_link(top.join(".bin/cli")).unwrap(),
            Path::new("../pkg/bin/cli.js")
        );
        assert_eq!(std::fs::read_to_string(top.join(".bin/cli")).unwrap(), "x");

        // Too deep: refused, with the path.
        let mut deep = t.path().join("deep");
        for _ in 0..=MAX_SET_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let e = settle_tree(&t.path().join("deep"), false, MAX_SET_BYTES).unwrap_err();
        assert!(e.contains("deeper than 128"), "{e}");
        // Over the size cap (allocated blocks, not the apparent size): refused.
        std::fs::write(top.join("pkg/big"), vec![7u8; 3 << 20]).unwrap();
        let e = settle_tree(&top, false, 2 << 20).unwrap_err();
        assert!(e.contains("more than 2 MiB"), "{e}");
        assert!(settle_tree(&top, false, 8 << 20).is_ok());
    }

    /// A failed install's directory goes even when the install left directories its owner
    /// cannot enter or write (mode 0000 and 0500 with entries): as an unprivileged caller
    /// `remove_dir_all` alone leaves them on disk for good.
    #[test]
    fn a_set_with_closed_directories_is_removed() {
        // As root, this thread gives up what lets root ignore permissions (capabilities are
        // per thread), so it meets the modes as their owner does.
        std::thread::spawn(|| {
            use caps::{CapSet, Capability};
            for c in [
                Capability::CAP_DAC_OVERRIDE,
                Capability::CAP_DAC_READ_SEARCH,
            ] {
                caps::drop(None, CapSet::Effective, c).unwrap();
            }
            let t = tempfile::tempdir().unwrap();
            let make = |top: &Path| {
                std::fs::create_dir_all(top.join("a/closed/inner")).unwrap();
                std::fs::write(top.join("a/closed/inner/f"), "x").unwrap();
                std::fs::create_dir_all(top.join("ro")).unwrap();
                std::fs::write(top.join("ro/f"), "x").unwrap();
                std::os::unix::fs::symlink("/etc", top.join("a/etc")).unwrap();
                let mode = |p: &str, m: u32| {
                    std::fs::set_permissions(top.join(p), std::fs::Permissions::from_mode(m))
                        .unwrap()
                };
                mode("a/closed/inner", 0o500);
                mode("a/closed", 0o000);
                mode("ro", 0o500);
            };
            // Deeper than a set may be (it was refused), and closed at the bottom.
            let mut deep = t.path().join(".tmp-deep");
            for _ in 0..MAX_SET_DEPTH + 20 {
                deep.push("d");
            }
            std::fs::create_dir_all(deep.join("closed/x")).unwrap();
            std::fs::set_permissions(deep.join("closed"), std::fs::Permissions::from_mode(0o000))
                .unwrap();
            remove_tree(&t.path().join(".tmp-deep"));
            assert!(
                !t.path().join(".tmp-deep").exists(),
                "the deep set is still there"
            );
            // The control: remove_dir_all alone cannot.
            let control = t.path().join(".tmp-control");
            make(&control);
            assert!(std::fs::remove_dir_all(&control).is_err());
            let top = t.path().join(".tmp-set");
            make(&top);
            remove_tree(&top);
            assert!(!top.exists(), "the set is still there");
            // The symlink was removed, not followed.
            assert!(Path::new("/etc/passwd").exists());
            remove_tree(&control);
            assert!(!control.exists());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn eviction_keeps_recent_sets_and_the_new_one() {
        let d = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3 * 3600);
        let name = |i: usize| format!("{i:064x}");
        for i in 0..MAX_SETS + 8 {
            let p = d.path().join(name(i));
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("f"), "x").unwrap();
            if i >= 4 {
                // Sets 0..4 were used just now; the rest hours ago, oldest first.
                std::fs::File::open(&p)
                    .unwrap()
                    .set_modified(old + std::time::Duration::from_secs(i as u64))
                    .unwrap();
            }
        }
        let keep = name(MAX_SETS + 7);
        evict(d.path(), &keep);
        let left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), MAX_SETS, "{left:?}");
        for i in 0..4 {
            assert!(left.contains(&name(i)), "recently used set {i} removed");
        }
        assert!(left.contains(&keep));
        assert!(
            !left.contains(&name(4)),
            "the least recently used set stays"
        );
    }

    #[test]
    fn a_cache_below_a_directory_others_control_is_refused() {
        let euid = nix::unistd::geteuid().as_raw();
        let t = tempfile::tempdir().unwrap();
        let shared = t.path().join("shared");
        let cache = shared.join("cordon").join("deps");
        std::fs::create_dir_all(&cache).unwrap();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(&shared, 0o755);
        crate::cache::private_dir(&cache).unwrap();
        // World-writable, not sticky: anyone could rename `cordon` and plant their own.
        mode(&shared, 0o777);
        let e = crate::cache::private_dir(&cache).unwrap_err().to_string();
        assert!(e.contains("shared") && e.contains("777"), "{e}");
        // Sticky (like /tmp): others cannot rename what they do not own.
        mode(&shared, 0o1777);
        crate::cache::private_dir(&cache).unwrap();
        // Owned by another user (who could chmod it at will).
        if euid == 0 {
            mode(&shared, 0o755);
            std::os::unix::fs::chown(&shared, Some(1001), None).unwrap();
            let e = crate::cache::private_dir(&cache).unwrap_err().to_string();
            assert!(e.contains("owner uid 1001"), "{e}");
        }
    }

    #[test]
    fn a_namespace_package_the_rootfs_would_hide_is_made_regular() {
        let t = tempfile::tempdir().unwrap();
        let (py, site) = (t.path().join("python"), t.path().join("site"));
        for d in [
            "mpl_toolkits/mplot3d",
            "own_ns",
            "regular",
            "not-an-identifier",
        ] {
            std::fs::create_dir_all(py.join(d)).unwrap();
        }
        std::fs::write(py.join("regular/__init__.py"), "x = 1\n").unwrap();
        for d in ["mpl_toolkits", "regular", "not-an-identifier", "linked"] {
            std::fs::create_dir_all(site.join(d)).unwrap();
            std::fs::write(site.join(d).join("__init__.py"), "").unwrap();
        }
        // A symlinked directory is not written through.
        std::os::unix::fs::symlink("own_ns", py.join("linked")).unwrap();
        let joined = join_shadowed_namespaces(&py, std::slice::from_ref(&site));
        assert_eq!(joined, ["mpl_toolkits"]);
        assert!(write_sitecustomize(&py, &joined));
        // The set's own sitecustomize is kept, and the caller told.
        assert!(!write_sitecustomize(&py, &joined));
        assert_eq!(
            std::fs::read_to_string(py.join("mpl_toolkits/__init__.py")).unwrap(),
            NAMESPACE_INIT
        );
        assert_eq!(
            std::fs::read_to_string(py.join("regular/__init__.py")).unwrap(),
            "x = 1\n"
        );
        for untouched in ["own_ns", "not-an-identifier", "linked"] {
            assert!(
                !py.join(untouched).join("__init__.py").exists(),
                "{untouched}"
            );
        }
        let sc = std::fs::read_to_string(py.join("sitecustomize.py")).unwrap();
        assert!(sc.contains("for _name in (\"mpl_toolkits\", ):"), "{sc}");
        // Again: nothing more to do.
        assert!(join_shadowed_namespaces(&py, &[site]).is_empty());
    }

    /// An install failure says how the installer ended and what to change, in words a
    /// caller knows: not the install sandbox's status.
    #[test]
    fn an_install_failure_says_how_the_installer_ended() {
        let limits = Limits {
            workspace_size: 16 << 20,
            memory: Some(1 << 30),
            tmp_size: 256 << 20,
            ..Limits::default()
        };
        let end = |status, message, error| InstallEnd {
            status,
            exit_code: (status == Status::RuntimeError).then_some(1),
            signal: (status == Status::Signaled).then_some(9),
            message,
            error,
            output: "",
        };
        let m = install_failure_message(
            "pip",
            &end(
                Status::RuntimeError,
                None,
                "ERROR: No matching distribution found for x\n",
            ),
            &limits,
        );
        assert_eq!(
            m,
            "installing the packages failed: pip exited with code 1; pip's messages are in `dependencies.error` (on stderr without --json)"
        );
        // ENOSPC, with nothing full any more when pip exited: /deps and what raises it.
        let enospc = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n";
        let m = install_failure_message("pip", &end(Status::RuntimeError, None, enospc), &limits);
        assert!(
            m.starts_with("installing the packages failed: pip exited with code 1; it ran out of space")
                && m.contains("into /deps, a tmpfs of 16 MiB: raise workspace_size in the profile's [packages.limits] (and memory there: the files count toward the install's memory limit of 1 GiB); a build that writes to /tmp instead has 256 MiB (tmp_size there)"),
            "{m}"
        );
        // The sandbox named the full filesystem itself: that is said once, not guessed at.
        let full = "/deps is full (all of its 16 MiB are used), so a write there failed with ENOSPC (\"No space left on device\") or would; raise it with workspace_size in the profile's [packages.limits]";
        let m = install_failure_message(
            "npm",
            &end(Status::RuntimeError, Some(full), "npm ERR! code ENOSPC\n"),
            &limits,
        );
        assert_eq!(
            m,
            format!(
                "installing the packages failed: npm exited with code 1; {full}; npm's messages are in `dependencies.error` (on stderr without --json)"
            )
        );
        let m = install_failure_message("pip", &end(Status::Signaled, None, ""), &limits);
        assert!(
            m.starts_with("installing the packages failed: pip was killed by SIGKILL;"),
            "{m}"
        );
        let timeout = "the wall-clock limit of 300s was reached; cordon killed every process of the sandbox (raise it with timeout in the profile's [packages.limits])";
        let m =
            install_failure_message("pip", &end(Status::Timeout, Some(timeout), enospc), &limits);
        assert_eq!(
            m,
            format!(
                "installing the packages failed: {timeout}; pip's messages are in `dependencies.error` (on stderr without --json)"
            )
        );
        let m = install_failure_message(
            "pip",
            &end(
                Status::RuntimeError,
                None,
                "/usr/bin/python3: No module named pip\n",
            ),
            &limits,
        );
        assert!(
            m.contains("; this python has no pip: on --rootfs host `apt-get install python3-pip`"),
            "{m}"
        );
    }

    /// An npm set's node_modules is also bound at /node_modules (where ES-module imports
    /// look), with NODE_PATH naming it, unless it is not a real directory or the root
    /// filesystem has a /node_modules the bind would hide.
    #[test]
    fn an_npm_set_is_bound_where_es_module_imports_look() {
        let t = tempfile::tempdir().unwrap();
        let set = t.path().join("set");
        std::fs::create_dir_all(set.join("node/node_modules/a")).unwrap();
        let dsts = |binds: &[Bind]| binds.iter().map(|b| b.dst.clone()).collect::<Vec<_>>();
        let (binds, env) = ready_binds(&installer("npm"), set.clone(), &Rootfs::Host);
        assert_eq!(dsts(&binds), ["/deps", "/node_modules"]);
        assert_eq!(binds[1].src, set.join("node/node_modules"));
        assert!(binds.iter().all(|b| !b.writable));
        assert_eq!(env, ("NODE_PATH".into(), "/node_modules".into()));
        // A root filesystem with a /node_modules of its own keeps it.
        let rootfs = t.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("node_modules")).unwrap();
        let (binds, env) = ready_binds(&installer("npm"), set.clone(), &Rootfs::Dir(rootfs));
        assert_eq!(dsts(&binds), ["/deps"]);
        assert_eq!(env.1, "/deps/node/node_modules");
        // A node_modules the install made a symlink is not bound.
        let linked = t.path().join("linked");
        std::fs::create_dir_all(linked.join("node/real")).unwrap();
        std::os::unix::fs::symlink("real", linked.join("node/node_modules")).unwrap();
        let (binds, _) = ready_binds(&installer("npm"), linked, &Rootfs::Host);
        assert_eq!(dsts(&binds), ["/deps"]);
        let (binds, env) = ready_binds(&installer("pip"), set, &Rootfs::Host);
        assert_eq!(dsts(&binds), ["/deps"]);
        assert_eq!(env, ("PYTHONPATH".into(), "/deps/python".into()));
    }

    #[test]
    fn index_hosts() {
        assert_eq!(
            index_host("https://pypi.org/simple").unwrap().to_string(),
            "pypi.org:443"
        );
        assert_eq!(
            index_host("http://localhost:8080/simple/")
                .unwrap()
                .to_string(),
            "localhost:8080"
        );
        assert_eq!(
            index_host("http://[::1]:81").unwrap().to_string(),
            "[::1]:81"
        );
        for bad in ["ftp://x", "https://", "https://u:p@host/", "pypi.org"] {
            assert!(index_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn package_lists() {
        assert_eq!(
            check_packages(&["requests".into(), " pandas==2.1 ".into(), "requests".into()])
                .unwrap(),
            vec!["pandas==2.1", "requests"]
        );
        assert!(check_packages(&["--index-url=http://evil".into()]).is_err());
        assert!(check_packages(&["a b".into()]).is_err());
        assert!(check_packages(&[]).is_err());
        assert!(check_packages(&vec!["x".to_string(); 101]).is_err());
    }

    #[test]
    fn argv_puts_packages_after_the_options() {
        let cfg = PackagesConfig {
            installer: "pip".into(),
            index: "https://pypi.org/simple".into(),
            hosts: vec![],
            limits: Default::default(),
        };
        let a = install_argv(&cfg, "https://pypi.org/simple", &["x".into()], false);
        assert_eq!(&a[a.len() - 2..], &["--".to_string(), "x".to_string()]);
        assert!(a.contains(&"--target".to_string()));
        let a = install_argv(&cfg, "https://pypi.org/simple", &[], true);
        assert_eq!(
            &a[a.len() - 3..],
            &["-r", "/deps/requirements.lock", "--"].map(String::from)
        );
    }

    #[test]
    fn npm_lock_gives_a_manifest_and_refuses_a_list_beside_it() {
        let lock = br#"{"name":"x","lockfileVersion":3,"packages":{"":{"name":"x","dependencies":{"a":"1.0.0"}},"node_modules/a":{"version":"1.0.0"}}}"#;
        let files = lock_files("npm", lock, &[]).unwrap();
        assert_eq!(files[0].0, "node/package-lock.json");
        let manifest: serde_json::Value = serde_json::from_slice(&files[1].1).unwrap();
        assert_eq!(manifest["dependencies"]["a"], "1.0.0");
        assert!(lock_files("npm", lock, &["b".into()]).is_err());
        assert!(
            lock_files("npm", b"{}", &[])
                .unwrap_err()
                .to_string()
                .contains("lockfileVersion")
        );
        assert!(lock_files("pip", b"\xff", &[]).is_err());
        assert_eq!(
            lock_files("pip", b"a==1\n", &[]).unwrap()[0].0,
            "requirements.lock"
        );
    }
}

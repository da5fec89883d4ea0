//! Per-language root filesystems: where they live, which ones are built, and building one.
//!
//! A recipe is `rootfs/<lang>/packages` (Debian packages, one a line, plus a
//! `# version-command:` line); `scripts/build-rootfs` turns it into a directory with mmdebstrap
//! and writes [`METADATA_FILE`] into it last, just before renaming the finished tree into place.
//! So a directory with a readable metadata file naming its language is a complete rootfs.
//!
//! The script and the recipes are compiled into cordon ([`SCRIPT`], [`RECIPES`]): `build` works
//! where cordon is installed without this repository.
//!
//! Where: `/var/lib/cordon/rootfs/<lang>` for root whose /var is its own
//! ([`crate::cache::system_dirs`]), else `$XDG_DATA_HOME/cordon/rootfs/<lang>`
//! (`~/.local/share` when XDG_DATA_HOME is unset or not absolute, as the XDG base directory
//! spec says). `scripts/build-rootfs` resolves the same default; `build` passes `--dest`
//! anyway so the two can never disagree.

use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

/// The builder script, embedded.
pub const SCRIPT: &str = include_str!("../scripts/build-rootfs");

/// The embedded recipes: (language, contents of `rootfs/<lang>/packages`).
pub const RECIPES: &[(&str, &str)] = &[
    ("bash", include_str!("../rootfs/bash/packages")),
    ("go", include_str!("../rootfs/go/packages")),
    ("node", include_str!("../rootfs/node/packages")),
    ("python", include_str!("../rootfs/python/packages")),
    ("rust", include_str!("../rootfs/rust/packages")),
];

/// The metadata file the builder writes at the top of a finished rootfs.
pub const METADATA_FILE: &str = ".cordon-rootfs.json";

/// Where root keeps built root filesystems (FHS: variable state data of a package).
pub const SYSTEM_DATA_DIR: &str = "/var/lib/cordon/rootfs";

/// How many of the builder's last output lines an error message quotes.
const TAIL_LINES: usize = 25;

/// A built root filesystem, as its metadata file describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuiltRootfs {
    pub language: String,
    pub path: PathBuf,
    /// The version line of the language's main tool, run inside the rootfs at build time.
    pub toolchain: Option<String>,
    /// When it was built (ISO 8601, UTC).
    pub built: Option<String>,
    /// Apparent size of the tree, measured at build time.
    pub size_bytes: Option<u64>,
}

/// What went wrong with a rootfs, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error(
        "invalid language name {0:?}: use lowercase letters, digits, '-' and '_' (e.g. python)"
    )]
    InvalidLanguage(String),
    #[error(
        "no rootfs recipe for language {language:?}: cordon knows {known}; add rootfs/{language}/packages \
         to a checkout and run scripts/build-rootfs {language} from it"
    )]
    UnknownLanguage { language: String, known: String },
    #[error(
        "cannot prepare the rootfs builder in {path}: {source}; check that $TMPDIR (or /tmp) is \
         writable"
    )]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot start the rootfs builder with bash: {source}; install bash (apt-get install bash)"
    )]
    Spawn { source: std::io::Error },
    #[error(
        "building the {language} rootfs into {dest} failed ({status}); the builder said:\n{tail}\n\
         Fix what it names above, then run `cordon rootfs build {language}` (or \
         scripts/build-rootfs {language}) again"
    )]
    BuildFailed {
        language: String,
        dest: PathBuf,
        status: ExitStatus,
        tail: String,
    },
    #[error(
        "the builder reported success but {path} has no valid {METADATA_FILE}; delete {dir} and \
         build again",
        path = .dir.join(METADATA_FILE).display(),
        dir = .dir.display()
    )]
    NoMetadata { dir: PathBuf },
}

/// The parent directory of built root filesystems for this process: the system one for root
/// whose /var is its own ([`crate::cache::system_dirs`]), else the caller's XDG data home.
pub fn data_dir() -> PathBuf {
    let euid = nix::unistd::geteuid().as_raw();
    let xdg = std::env::var_os("XDG_DATA_HOME");
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(euid))
                .ok()
                .flatten()
                .map(|u| u.dir)
        });
    data_dir_for(crate::cache::system_dirs(), xdg.as_deref(), home.as_deref())
}

/// [`data_dir`] with its inputs as parameters. A relative XDG_DATA_HOME is ignored (XDG spec);
/// without any home, `/nonexistent` makes the eventual error name the problem.
fn data_dir_for(system: bool, xdg_data_home: Option<&OsStr>, home: Option<&Path>) -> PathBuf {
    if system {
        return PathBuf::from(SYSTEM_DATA_DIR);
    }
    let data_home = match xdg_data_home.map(Path::new) {
        Some(x) if x.is_absolute() => x.to_path_buf(),
        _ => home
            .unwrap_or(Path::new("/nonexistent"))
            .join(".local/share"),
    };
    data_home.join("cordon/rootfs")
}

/// Where the rootfs for `lang` lives (built or not).
pub fn path_for(lang: &str) -> PathBuf {
    data_dir().join(lang)
}

/// A language name is a single safe path component.
pub fn valid_language(lang: &str) -> bool {
    let mut chars = lang.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && lang.len() <= 64
}

/// The embedded package list for `lang`.
pub fn recipe(lang: &str) -> Option<&'static str> {
    RECIPES.iter().find(|(l, _)| *l == lang).map(|(_, r)| *r)
}

/// The languages cordon has recipes for.
pub fn known_languages() -> Vec<&'static str> {
    RECIPES.iter().map(|(l, _)| *l).collect()
}

/// Every complete rootfs under [`data_dir`], sorted by language. Entries without a valid
/// metadata file (half-built temp dirs, junk) are left out.
pub fn list() -> Vec<BuiltRootfs> {
    list_in(&data_dir())
}

fn list_in(dir: &Path) -> Vec<BuiltRootfs> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<BuiltRootfs> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !valid_language(&name) {
                return None; // .python.building.*, .python.lock, stray files
            }
            find_in(dir, &name)
        })
        .collect();
    found.sort_by(|a, b| a.language.cmp(&b.language));
    found
}

/// The complete rootfs for `lang`, if one is built.
pub fn find(lang: &str) -> Option<BuiltRootfs> {
    find_in(&data_dir(), lang)
}

fn find_in(dir: &Path, lang: &str) -> Option<BuiltRootfs> {
    if !valid_language(lang) {
        return None;
    }
    let path = dir.join(lang);
    if !path.join("usr").is_dir() {
        return None;
    }
    let text = std::fs::read_to_string(path.join(METADATA_FILE)).ok()?;
    parse_metadata(&text, lang, path)
}

/// Reads a metadata file leniently: it must be a JSON object whose `language` is `lang`; every
/// other field is taken when it has the right type and ignored otherwise.
fn parse_metadata(text: &str, lang: &str, path: PathBuf) -> Option<BuiltRootfs> {
    let v: Value = serde_json::from_str(text).ok()?;
    let obj = v.as_object()?;
    if obj.get("language")?.as_str()? != lang {
        return None;
    }
    let text_field = |k: &str| {
        obj.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    Some(BuiltRootfs {
        language: lang.to_string(),
        path,
        toolchain: text_field("toolchain"),
        built: text_field("built"),
        size_bytes: obj.get("sizeBytes").and_then(Value::as_u64),
    })
}

/// Removes the builder's temp dir however `build` ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes the embedded script and `lang`'s package list into a fresh private temp dir.
fn stage_builder(lang: &str, packages: &str) -> Result<(TempDir, PathBuf, PathBuf), RootfsError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "cordon-build-rootfs.{}.{nanos:09}",
        std::process::id()
    ));
    let prepare = |path: &Path, source| RootfsError::Prepare {
        path: path.to_path_buf(),
        source,
    };
    // create (not create_all): fails if the name exists, so nobody can pre-plant it.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| prepare(&dir, e))?;
    let guard = TempDir(dir.clone());
    let write = |name: &str, contents: &str| -> Result<PathBuf, RootfsError> {
        let path = dir.join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(contents.as_bytes()))
            .map_err(|e| prepare(&path, e))?;
        Ok(path)
    };
    let script = write("build-rootfs", SCRIPT)?;
    let list = write(&format!("{lang}.packages"), packages)?;
    Ok((guard, script, list))
}

/// Builds the rootfs for `lang` into [`path_for`]`(lang)` by running the embedded
/// `scripts/build-rootfs` with bash; takes minutes (it downloads and installs Debian packages).
/// With `progress`, the builder's output is passed to stderr as it comes; either way an error
/// quotes its last lines.
pub fn build(lang: &str, progress: bool) -> Result<BuiltRootfs, RootfsError> {
    if !valid_language(lang) {
        return Err(RootfsError::InvalidLanguage(lang.to_string()));
    }
    let packages = recipe(lang).ok_or_else(|| RootfsError::UnknownLanguage {
        language: lang.to_string(),
        known: known_languages().join(", "),
    })?;
    let dest = path_for(lang);
    let (_guard, script, list) = stage_builder(lang, packages)?;
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(lang)
        .arg("--dest")
        .arg(&dest)
        .arg("--packages-file")
        .arg(&list)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RootfsError::Spawn { source })?;

    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
    let pump = |pipe: Option<Box<dyn Read + Send>>| {
        let tail = Arc::clone(&tail);
        pipe.map(|p| std::thread::spawn(move || relay(p, progress, &tail)))
    };
    let readers = [
        pump(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        pump(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ];
    let status = child
        .wait()
        .map_err(|source| RootfsError::Spawn { source })?;
    for r in readers.into_iter().flatten() {
        let _ = r.join();
    }
    if !status.success() {
        let tail = tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        return Err(RootfsError::BuildFailed {
            language: lang.to_string(),
            dest,
            status,
            tail,
        });
    }
    find(lang).ok_or(RootfsError::NoMetadata { dir: dest })
}

/// Copies the builder's output line by line to stderr (when `progress`) and keeps the last
/// [`TAIL_LINES`] for the error message.
fn relay(pipe: impl Read, progress: bool, tail: &Mutex<VecDeque<String>>) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
        if progress {
            let _ = std::io::stderr().write_all(&line);
        }
        // mmdebstrap draws progress bars with '\r': keep only the last state of the line.
        let text = String::from_utf8_lossy(&line);
        let text = text
            .trim_end()
            .rsplit('\r')
            .next()
            .unwrap_or("")
            .to_string();
        if let Ok(mut t) = tail.lock() {
            if t.len() == TAIL_LINES {
                t.pop_front();
            }
            t.push_back(text);
        }
        line.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_uses_var_lib_whatever_xdg_says() {
        let p = data_dir_for(
            true,
            Some(OsStr::new("/home/x/.data")),
            Some(Path::new("/root")),
        );
        assert_eq!(p, PathBuf::from("/var/lib/cordon/rootfs"));
        assert_eq!(
            data_dir_for(true, None, None),
            PathBuf::from("/var/lib/cordon/rootfs")
        );
    }

    #[test]
    fn user_uses_xdg_data_home_when_absolute() {
        let p = data_dir_for(
            false,
            Some(OsStr::new("/data/me")),
            Some(Path::new("/home/me")),
        );
        assert_eq!(p, PathBuf::from("/data/me/cordon/rootfs"));
    }

    #[test]
    fn user_falls_back_to_local_share() {
        let home = Some(Path::new("/home/me"));
        let want = PathBuf::from("/home/me/.local/share/cordon/rootfs");
        assert_eq!(data_dir_for(false, None, home), want);
        // Empty and relative values are ignored, as the XDG spec says.
        assert_eq!(data_dir_for(false, Some(OsStr::new("")), home), want);
        assert_eq!(data_dir_for(false, Some(OsStr::new("rel/dir")), home), want);
        assert_eq!(
            data_dir_for(false, None, None),
            PathBuf::from("/nonexistent/.local/share/cordon/rootfs")
        );
    }

    #[test]
    fn path_for_appends_the_language() {
        assert_eq!(path_for("python"), data_dir().join("python"));
    }

    #[test]
    fn language_names() {
        for ok in ["python", "node", "go", "rust", "bash", "py3", "my-lang_2"] {
            assert!(valid_language(ok), "{ok}");
        }
        for bad in [
            "", ".", "..", "../x", "a/b", "Python", "-x", "_x", ".python", "a b",
        ] {
            assert!(!valid_language(bad), "{bad}");
        }
        assert!(!valid_language(&"a".repeat(65)));
    }

    #[test]
    fn every_language_has_an_embedded_recipe_with_a_version_command() {
        for lang in ["python", "node", "go", "rust", "bash"] {
            let r = recipe(lang).unwrap_or_else(|| panic!("no recipe for {lang}"));
            assert!(
                r.lines().any(|l| l.starts_with("# version-command: ")),
                "{lang}: no version-command line"
            );
            assert!(
                r.lines()
                    .any(|l| !l.trim().is_empty() && !l.starts_with('#')),
                "{lang}: no package"
            );
        }
        assert!(recipe("cobol").is_none());
        assert!(SCRIPT.starts_with("#!/usr/bin/env bash"));
    }

    const GOOD: &str = r#"{
      "language": "python", "packages": ["python3", "python3-numpy"],
      "built": "2025-05-20T10:00:00Z", "toolchain": "Python 3.11.2",
      "suite": "bookworm", "sizeBytes": 123456, "somethingNew": {"x": 1}
    }"#;

    #[test]
    fn metadata_is_parsed() {
        let r = parse_metadata(GOOD, "python", "/r/python".into()).expect("parses");
        assert_eq!(
            r,
            BuiltRootfs {
                language: "python".into(),
                path: "/r/python".into(),
                toolchain: Some("Python 3.11.2".into()),
                built: Some("2025-05-20T10:00:00Z".into()),
                size_bytes: Some(123456),
            }
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["sizeBytes"], 123456);
        assert_eq!(json["path"], "/r/python");
    }

    #[test]
    fn metadata_junk_is_tolerated() {
        let p = || PathBuf::from("/r/python");
        assert!(parse_metadata("", "python", p()).is_none());
        assert!(parse_metadata("not json", "python", p()).is_none());
        assert!(parse_metadata("[1,2]", "python", p()).is_none());
        assert!(parse_metadata("{}", "python", p()).is_none());
        // Another language's metadata in this directory: not a python rootfs.
        assert!(parse_metadata(r#"{"language":"node"}"#, "python", p()).is_none());
        assert!(parse_metadata(r#"{"language":7}"#, "python", p()).is_none());
        // Wrong-typed optional fields are dropped, not fatal.
        let r = parse_metadata(
            r#"{"language":"python","toolchain":5,"built":"","sizeBytes":-3}"#,
            "python",
            p(),
        )
        .expect("language is enough");
        assert_eq!((r.toolchain, r.built, r.size_bytes), (None, None, None));
    }

    #[test]
    fn list_reads_complete_rootfs_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mk = |name: &str, meta: Option<&str>| {
            std::fs::create_dir_all(d.join(name).join("usr")).unwrap();
            if let Some(m) = meta {
                std::fs::write(d.join(name).join(METADATA_FILE), m).unwrap();
            }
        };
        mk("python", Some(GOOD));
        mk(
            "node",
            Some(r#"{"language":"node","toolchain":"v18.19.0"}"#),
        );
        mk("go", None); // interrupted before the metadata: incomplete
        mk("rust", Some("{garbage"));
        mk("bash", Some(r#"{"language":"python"}"#)); // mislabelled
        mk(".python.building.Ab12", Some(GOOD));
        std::fs::write(d.join(".python.lock"), "").unwrap();
        std::fs::write(d.join("stray-file"), "x").unwrap();
        let got: Vec<(String, Option<String>)> = list_in(d)
            .into_iter()
            .map(|r| (r.language, r.toolchain))
            .collect();
        assert_eq!(
            got,
            vec![
                ("node".to_string(), Some("v18.19.0".to_string())),
                ("python".to_string(), Some("Python 3.11.2".to_string())),
            ]
        );
        assert_eq!(find_in(d, "python").unwrap().path, d.join("python"));
        assert!(find_in(d, "go").is_none());
        assert!(find_in(d, "../python").is_none());
        assert!(list_in(&d.join("missing")).is_empty());
    }

    #[test]
    fn unknown_and_invalid_languages_are_refused_before_any_work() {
        let e = build("cobol", false).unwrap_err();
        assert!(matches!(e, RootfsError::UnknownLanguage { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("python") && msg.contains("rootfs/cobol/packages"),
            "{msg}"
        );
        let e = build("../etc", false).unwrap_err();
        assert!(matches!(e, RootfsError::InvalidLanguage(_)), "{e}");
    }

    #[test]
    fn staged_builder_is_private_and_removed() {
        let (guard, script, list) = stage_builder("python", "python3\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let dir = guard.0.clone();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(std::fs::read_to_string(&script).unwrap(), SCRIPT);
        assert_eq!(std::fs::read_to_string(&list).unwrap(), "python3\n");
        drop(guard);
        assert!(!dir.exists());
    }

    #[test]
    fn relay_keeps_the_last_lines_and_the_last_progress_state() {
        let mut input = String::new();
        for i in 0..40 {
            input.push_str(&format!("line {i}\n"));
        }
        input.push_str("I: downloading 10%\r20%\r100%\n");
        let tail = Mutex::new(VecDeque::new());
        relay(input.as_bytes(), false, &tail);
        let t = tail.into_inner().unwrap();
        assert_eq!(t.len(), TAIL_LINES);
        assert_eq!(t.back().unwrap(), "100%");
        assert_eq!(t.front().unwrap(), &format!("line {}", 41 - TAIL_LINES));
    }
}

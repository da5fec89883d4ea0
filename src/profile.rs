//! Language profiles: how to run (and first compile) code in one language. One TOML file per
//! language under `profiles/`, embedded at build time; users add or override languages with
//! `--profile PATH` or files in `$XDG_CONFIG_HOME/cordon/profiles/` (see profiles/README.md,
//! which documents every key). Unknown keys are errors.

use crate::spec::{self, Collect, LimitNaming, Limits, ParseError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The built-in profiles, embedded so that an installed cordon needs no data files.
const BUILTIN: &[(&str, &str)] = &[
    ("python", include_str!("../profiles/python.toml")),
    ("node", include_str!("../profiles/node.toml")),
    ("go", include_str!("../profiles/go.toml")),
    ("rust", include_str!("../profiles/rust.toml")),
    ("bash", include_str!("../profiles/bash.toml")),
];

/// Language names that mean the same profile.
const ALIASES: &[(&str, &str)] = &[
    ("py", "python"),
    ("python3", "python"),
    ("js", "node"),
    ("javascript", "node"),
    ("golang", "go"),
    ("sh", "bash"),
];

/// File extensions that choose a built-in profile besides its `source`'s (`cordon run FILE`
/// without `--lang`): Node.js's ES and CommonJS modules, a bash script named so.
const EXTRA_EXTENSIONS: &[(&str, &str)] = &[("mjs", "node"), ("cjs", "node"), ("bash", "bash")];

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "unknown language `{0}`; known: {1}. Add one with --profile FILE.toml (see profiles/README.md)"
    )]
    Unknown(String, String),
    #[error("profile {origin}: {message}; see profiles/README.md for the keys")]
    Invalid { origin: String, message: String },
    #[error("cannot read profile {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Limit overrides a profile may set; every one is optional and keeps cordon's default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    // Durations and sizes are strings (`"30s"`, `"512M"`); a bare number (`timeout = 30`,
    // `tmp_size = 0`) is read as the same string would be.
    #[serde(default, deserialize_with = "text_or_number")]
    pub timeout: Option<String>,
    #[serde(default, deserialize_with = "text_or_number")]
    pub cpu_time: Option<String>,
    #[serde(default, deserialize_with = "text_or_number")]
    pub memory: Option<String>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
    #[serde(default, deserialize_with = "text_or_number")]
    pub output_limit: Option<String>,
    #[serde(default, deserialize_with = "text_or_number")]
    pub file_size: Option<String>,
    pub open_files: Option<u64>,
    #[serde(default, deserialize_with = "text_or_number")]
    pub workspace_size: Option<String>,
    /// Files, directories and symlinks /workspace may hold (its tmpfs's inode count).
    pub workspace_inodes: Option<u64>,
    #[serde(default, deserialize_with = "text_or_number")]
    pub tmp_size: Option<String>,
    /// The most files collected from /workspace (the program's outputs: [`Collect`]).
    pub collect_files: Option<u64>,
    /// The most bytes of file contents collected from /workspace.
    #[serde(default, deserialize_with = "text_or_number")]
    pub collect_size: Option<String>,
    /// Who set these, for the names in errors (a profile's are checked when it loads).
    #[serde(skip)]
    pub naming: LimitNaming,
}

/// A duration or size written as a string or as a bare number. A value of another type is an
/// error that says what is expected (not serde's "did not match any variant").
fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct Text;
    impl<'de> serde::de::Visitor<'de> for Text {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a duration or size as a string (\"30s\", \"512M\") or a number")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            // Negative values reach the limit parser, whose error names the limit.
            Ok(Some(v.to_string()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: serde::Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
    }
    d.deserialize_option(Text)
}

impl LimitOverrides {
    /// Applies these overrides on top of `base`; an error names the limit as
    /// [`LimitOverrides::naming`] says.
    pub fn apply(&self, base: &mut Limits) -> Result<(), ParseError> {
        self.apply_named(base, self.naming)
    }

    /// [`LimitOverrides::apply`], with errors naming the limits as `naming` says.
    pub fn apply_named(&self, base: &mut Limits, naming: LimitNaming) -> Result<(), ParseError> {
        let named = |key: &'static str| {
            move |mut e: ParseError| {
                e.what = naming.name(key);
                e
            }
        };
        let size = |key: &'static str, v: &Option<String>| {
            v.as_deref()
                .map(spec::parse_size)
                .transpose()
                .map_err(named(key))
        };
        let dur = |key: &'static str, v: &Option<String>| {
            v.as_deref()
                .map(spec::parse_duration)
                .transpose()
                .map_err(named(key))
        };
        // tmpfs reads 0 as "no cap" (see SandboxSpec::validate): refused here already, with
        // the limit's own name.
        let zero = |key: &str| {
            ParseError::new(
                &naming.name(key),
                "0",
                "a tmpfs of 0 would have no cap at all; give a positive value",
            )
        };
        if let Some(t) = dur("timeout", &self.timeout)? {
            if t.is_zero() {
                return Err(ParseError::new(
                    &naming.name("timeout"),
                    "0",
                    spec::TIMEOUT_ZERO,
                ));
            }
            base.wall = t;
        }
        // 0 = no CPU-time limit, as 0 lifts the memory, CPU and process limits.
        if let Some(t) = dur("cpu_time", &self.cpu_time)? {
            base.cpu_time = (!t.is_zero()).then_some(t);
        }
        let memory = self
            .memory
            .as_deref()
            .map(spec::parse_memory)
            .transpose()
            .map_err(named("memory"))?;
        if let Some(m) = memory {
            base.memory = (m > 0).then_some(m);
        }
        if let Some(c) = self.cpus {
            if !(c >= 0.0 && c.is_finite()) {
                return Err(ParseError::new(
                    &naming.name("cpus"),
                    &c.to_string(),
                    "give a number of CPUs, or 0 for no limit",
                ));
            }
            base.cpus = (c > 0.0).then_some(c);
        }
        if let Some(p) = self.pids {
            base.pids = (p > 0).then_some(p);
        }
        if let Some(o) = size("output_limit", &self.output_limit)? {
            if o == 0 {
                return Err(ParseError::new(
                    &naming.name("output_limit"),
                    "0",
                    spec::OUTPUT_LIMIT_ZERO,
                ));
            }
            base.output = o;
        }
        if let Some(f) = size("file_size", &self.file_size)? {
            base.file_size = (f > 0).then_some(f);
        }
        if let Some(n) = self.open_files {
            base.open_files = n;
        }
        if let Some(w) = size("workspace_size", &self.workspace_size)? {
            base.workspace_size = (w > 0).then_some(w).ok_or_else(|| zero("workspace_size"))?;
        }
        if let Some(n) = self.workspace_inodes {
            base.workspace_inodes = (n > 0)
                .then_some(n)
                .ok_or_else(|| zero("workspace_inodes"))?;
        }
        if let Some(t) = size("tmp_size", &self.tmp_size)? {
            base.tmp_size = (t > 0).then_some(t).ok_or_else(|| zero("tmp_size"))?;
        }
        // Not limits of the sandbox, but checked with them, wherever they are given.
        self.apply_collect_named(&mut Collect::default(), naming)?;
        Ok(())
    }

    /// Applies the collection caps of these overrides (`collect_files`, `collect_size`) on
    /// top of `base`; an error names the cap as [`LimitOverrides::naming`] says.
    pub fn apply_collect(&self, base: &mut Collect) -> Result<(), ParseError> {
        self.apply_collect_named(base, self.naming)
    }

    fn apply_collect_named(
        &self,
        base: &mut Collect,
        naming: LimitNaming,
    ) -> Result<(), ParseError> {
        let named = |key: &'static str| {
            move |mut e: ParseError| {
                e.what = naming.name(key);
                e
            }
        };
        if let Some(n) = self.collect_files {
            base.max_files = spec::check_collect_files(n).map_err(named("collect_files"))?;
        }
        if let Some(s) = &self.collect_size {
            base.max_bytes = spec::parse_collect_size(s).map_err(named("collect_size"))?;
        }
        Ok(())
    }

    /// Whether these overrides set a collection cap, which only a run phase's `[limits]`
    /// (the program's outputs) takes.
    pub fn sets_collect(&self) -> bool {
        self.collect_files.is_some() || self.collect_size.is_some()
    }
}

fn default_rootfs() -> String {
    "auto".into()
}
fn default_seccomp() -> String {
    "default".into()
}

/// One language.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The language name (`cordon run --lang NAME`).
    pub name: String,
    pub description: String,
    /// The file name the code is written to in /workspace.
    pub source: String,
    /// The compiler's argv, for compiled languages. `{source}` and `{artifact}` are replaced.
    #[serde(default)]
    pub compile: Option<Vec<String>>,
    /// The file the compiler writes (relative to /workspace); required with `compile`.
    #[serde(default)]
    pub artifact: Option<String>,
    /// The argv that runs the program; the caller's arguments are appended.
    pub run: Vec<String>,
    /// argv that prints the toolchain version (`cordon profiles`).
    #[serde(default)]
    pub version: Option<Vec<String>>,
    /// Extra environment for the run.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Extra environment for the compile.
    #[serde(default)]
    pub compile_env: BTreeMap<String, String>,
    /// `auto` (the built rootfs for this language if there is one, else the host), `host`, or
    /// a directory.
    #[serde(default = "default_rootfs")]
    pub rootfs: String,
    /// Built-in seccomp policy name.
    #[serde(default = "default_seccomp")]
    pub seccomp: String,
    /// Run-phase limit defaults.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// Compile-phase limit defaults (on top of cordon's, not of `limits`).
    #[serde(default)]
    pub compile_limits: LimitOverrides,
    /// How `--packages` installs dependencies for this language (absent: not supported).
    #[serde(default)]
    pub packages: Option<PackagesConfig>,
}

/// `[packages]`: the installer, its index, the registry hosts the install may reach, and the
/// install phase's limits. See profiles/README.md.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PackagesConfig {
    /// `pip` or `npm`.
    pub installer: String,
    /// The package index: pip's `--index-url`, npm's `--registry`.
    pub index: String,
    /// Allow-list entries (`HOST[:PORT]`, `*.suffix`) the install may reach when `index` is
    /// the profile's own; an index given with `--package-index` admits its own host only.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Install-phase limits, on top of cordon's defaults for installs.
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// The installers cordon knows how to drive.
pub const INSTALLERS: &[&str] = &["pip", "npm"];

impl Profile {
    /// Parses and checks one profile.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let inv = |message: String| ProfileError::Invalid {
            origin: origin.into(),
            message,
        };
        let p: Profile = toml::from_str(text).map_err(|e| inv(e.to_string()))?;
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(inv(format!(
                "`name` {:?} must be letters, digits, - or _",
                p.name
            )));
        }
        spec::check_relative_path(&p.source).map_err(|e| inv(format!("`source`: {e}")))?;
        if p.run.is_empty() {
            return Err(inv("`run` must name a program".into()));
        }
        match (&p.compile, &p.artifact) {
            (Some(c), Some(a)) => {
                if c.is_empty() {
                    return Err(inv("`compile` must name a program".into()));
                }
                spec::check_relative_path(a).map_err(|e| inv(format!("`artifact`: {e}")))?;
            }
            (Some(_), None) => {
                return Err(inv(
                    "`compile` needs `artifact`: the file the compiler writes".into(),
                ));
            }
            (None, Some(_)) => return Err(inv("`artifact` without `compile`".into())),
            (None, None) => {}
        }
        for (k, _) in p.env.iter().chain(&p.compile_env) {
            spec::parse_env_pair(&format!("{k}=")).map_err(|e| inv(e.to_string()))?;
        }
        let mut l = Limits::default();
        p.limits
            .apply_named(&mut l, LimitNaming::Profile)
            .map_err(|e| inv(format!("[limits]: {e}")))?;
        p.compile_limits
            .apply_named(&mut l, LimitNaming::Profile)
            .map_err(|e| inv(format!("[compile_limits]: {e}")))?;
        if p.compile_limits.sets_collect() {
            return Err(inv(
                "[compile_limits]: collect_files and collect_size belong in [limits]: a compile collects only its artifact".into(),
            ));
        }
        if !crate::security::seccomp::builtin_names().contains(&p.seccomp.as_str()) {
            return Err(inv(format!(
                "`seccomp` {:?} is not a built-in policy",
                p.seccomp
            )));
        }
        if let Some(pk) = &p.packages {
            if !INSTALLERS.contains(&pk.installer.as_str()) {
                return Err(inv(format!(
                    "[packages] installer {:?}: one of {}",
                    pk.installer,
                    INSTALLERS.join(", ")
                )));
            }
            crate::deps::index_host(&pk.index)
                .map_err(|e| inv(format!("[packages] index: {e}")))?;
            for h in &pk.hosts {
                crate::net::policy::parse_entry(h)
                    .map_err(|e| inv(format!("[packages] hosts: {e}")))?;
            }
            pk.limits
                .apply_named(&mut l, LimitNaming::Profile)
                .map_err(|e| inv(format!("[packages.limits]: {e}")))?;
            if pk.limits.sets_collect() {
                return Err(inv(
                    "[packages.limits]: collect_files and collect_size belong in [limits]: an install collects no files".into(),
                ));
            }
        }
        Ok(p)
    }

    /// Replaces `{source}`, `{source_dir}` (the source's directory in /workspace, as `.` or
    /// `./DIR`: Go builds the package there, every file of it) and `{artifact}` in an argv.
    pub fn expand(&self, argv: &[String], source: &str) -> Vec<String> {
        let artifact = self.artifact.as_deref().unwrap_or("");
        let dir = match source.rsplit_once('/') {
            Some((dir, _)) if !dir.is_empty() => format!("./{dir}"),
            _ => ".".to_string(),
        };
        let values = [
            ("{source_dir}", dir.as_str()),
            ("{source}", source),
            ("{artifact}", artifact),
        ];
        // In one pass: a value that holds a placeholder's text (a file named
        // `{artifact}/x.go`) stays as it is.
        argv.iter()
            .map(|a| {
                let mut out = String::new();
                let mut rest = a.as_str();
                while !rest.is_empty() {
                    match values.iter().find(|(p, _)| rest.starts_with(p)) {
                        Some((p, v)) => {
                            out.push_str(v);
                            rest = &rest[p.len()..];
                        }
                        None => {
                            let c = rest.chars().next().unwrap_or_default();
                            out.push(c);
                            rest = &rest[c.len_utf8()..];
                        }
                    }
                }
                out
            })
            .collect()
    }

    pub fn is_compiled(&self) -> bool {
        self.compile.is_some()
    }
}

/// The user's profile directory: `$XDG_CONFIG_HOME/cordon/profiles` (default
/// `~/.config/cordon/profiles`).
pub fn user_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("cordon").join("profiles"))
}

/// Every profile: built-ins, then the user's directory (a user file overrides a built-in of
/// the same name), then `extra` files (`--profile`).
pub fn all(extra: &[PathBuf]) -> Result<BTreeMap<String, Profile>, ProfileError> {
    let mut out = BTreeMap::new();
    for (name, text) in BUILTIN {
        let p = Profile::parse(text, &format!("built-in `{name}`"))?;
        out.insert(p.name.clone(), p);
    }
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(dir) = user_dir()
        && let Ok(rd) = std::fs::read_dir(&dir)
    {
        let mut v: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        v.sort();
        files.extend(v);
    }
    files.extend(extra.iter().cloned());
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|source| ProfileError::Read {
            path: path.clone(),
            source,
        })?;
        let p = Profile::parse(&text, &path.display().to_string())?;
        out.insert(p.name.clone(), p);
    }
    Ok(out)
}

/// Whether `name` is a built-in language or one of its aliases (`python`, `py`, `js`, ...).
pub fn is_builtin_name(name: &str) -> bool {
    BUILTIN.iter().any(|(n, _)| *n == name) || ALIASES.iter().any(|(a, _)| *a == name)
}

/// Finds the profile for `lang` (a name or an alias).
pub fn find(lang: &str, extra: &[PathBuf]) -> Result<Profile, ProfileError> {
    let profiles = all(extra)?;
    let alias = |l: &str| {
        ALIASES
            .iter()
            .find(|(a, _)| *a == l)
            .map_or(l.to_string(), |(_, n)| n.to_string())
    };
    // As written first (a profile of one's own may be named in capitals), then in lower case
    // (`--lang Python`).
    let found = profiles
        .get(&alias(lang))
        .or_else(|| profiles.get(&alias(&lang.to_lowercase())));
    found.cloned().ok_or_else(|| {
        ProfileError::Unknown(
            lang.into(),
            profiles.keys().cloned().collect::<Vec<_>>().join(", "),
        )
    })
}

/// The language of `cordon run FILE` without `--lang`: the one profile whose source file has
/// FILE's extension (`.py`: python), else, with no FILE (`-c`, stdin) or none matching, the one
/// profile given with `--profile`. An error says why none could be chosen.
pub fn infer(file: Option<&Path>, extra: &[PathBuf]) -> Result<String, String> {
    let profiles = all(extra).map_err(|e| e.to_string())?;
    let ext = file
        .filter(|f| f.as_os_str() != "-")
        .and_then(|f| f.extension())
        .and_then(|e| e.to_str());
    let by_ext: Vec<&str> = match ext {
        Some(ext) => profiles
            .values()
            .filter(|p| {
                Path::new(&p.source).extension().and_then(|e| e.to_str()) == Some(ext)
                    || EXTRA_EXTENSIONS.contains(&(ext, p.name.as_str()))
            })
            .map(|p| p.name.as_str())
            .collect(),
        None => Vec::new(),
    };
    if let [one] = by_ext[..] {
        return Ok(one.to_string());
    }
    let given: Vec<String> = extra
        .iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            Profile::parse(&text, "").ok().map(|p| p.name)
        })
        .collect();
    if by_ext.is_empty()
        && let [one] = &given[..]
    {
        return Ok(one.clone());
    }
    let known = profiles.keys().cloned().collect::<Vec<_>>().join(", ");
    Err(match (ext, by_ext.len()) {
        (Some(ext), 2..) => format!(
            "give the language with --lang: the profiles {} all take .{ext} files",
            by_ext.join(", ")
        ),
        (Some(ext), _) => {
            format!("give the language with --lang ({known}): no profile takes .{ext} files")
        }
        (None, _) => format!("give the language with --lang ({known})"),
    })
}

/// The host file the sandbox's lookup of a profile's `program` on `path` (its PATH) lands
/// on, for the toolchain check, the compile cache key's toolchain identity and `cordon
/// profiles`. A directory under a bind's destination is read from the bind's source; any
/// other from the root filesystem: `--rootfs DIR`'s, or on `--rootfs host` the host's, of
/// which the sandbox sees only /usr, /bin, /sbin and /lib* (a directory elsewhere, such as
/// rustup's under /root, is not searched). A name with a `/` is taken as it is (the sandbox
/// reports it when it is not there); relative directories of `path` (the sandbox's
/// workspace) are not searched. None when no directory has it.
pub fn resolve_on_host(
    program: &str,
    rootfs: &spec::Rootfs,
    path: &str,
    binds: &[spec::Bind],
) -> Option<PathBuf> {
    let root = match rootfs {
        spec::Rootfs::Host => Path::new("/"),
        spec::Rootfs::Dir(d) => d.as_path(),
    };
    let host = |p: &str| -> Option<PathBuf> {
        for b in binds {
            if let Some(rest) = p.strip_prefix(b.dst.as_str())
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return Some(b.src.join(rest.trim_start_matches('/')));
            }
        }
        let rel = p.trim_start_matches('/');
        let top = rel.split('/').next().unwrap_or("");
        let shown = match rootfs {
            spec::Rootfs::Host => crate::fs::plan::HOST_TOP.contains(&top),
            spec::Rootfs::Dir(_) => true,
        };
        shown.then(|| root.join(rel))
    };
    if program.contains('/') {
        return Some(host(program).unwrap_or_else(|| root.join(program.trim_start_matches('/'))));
    }
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .filter_map(|d| host(d).map(|h| h.join(program)))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argv_names_the_source_its_directory_and_the_artifact() {
        let p = all(&[]).unwrap().remove("go").unwrap();
        let argv: Vec<String> = ["build", "{source_dir}", "{source}", "-o", "{artifact}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            p.expand(&argv, "main.go"),
            ["build", ".", "main.go", "-o", "main"]
        );
        assert_eq!(
            p.expand(&argv, "cmd/app/x.go"),
            ["build", "./cmd/app", "cmd/app/x.go", "-o", "main"]
        );
        // A name with a placeholder's text in it is not expanded again.
        assert_eq!(
            p.expand(&argv, "{artifact}/x.go"),
            ["build", "./{artifact}", "{artifact}/x.go", "-o", "main"]
        );
    }

    /// `0.4` is not 0 (no limit), and `512` (bytes) is not a memory limit anyone means;
    /// the errors name the flag, key or field that was given.
    #[test]
    fn a_limit_that_rounds_to_zero_or_a_tiny_memory_limit_is_refused_by_name() {
        let mut l = Limits::default();
        for (naming, name) in [
            (LimitNaming::Flags, "--memory"),
            (LimitNaming::CompileFlags, "--compile-memory"),
            (LimitNaming::Profile, "invalid memory"),
        ] {
            for (given, hint) in [("0.4", "less than one byte"), ("512", "did you mean 512M?")] {
                let o = LimitOverrides {
                    memory: Some(given.into()),
                    ..Default::default()
                };
                let e = o.apply_named(&mut l, naming).unwrap_err().to_string();
                assert!(
                    e.contains(name) && e.contains(hint),
                    "{naming:?} {given}: {e}"
                );
            }
        }
        let o = LimitOverrides {
            file_size: Some("0.4".into()),
            cpu_time: Some("0.0000000001".into()),
            ..Default::default()
        };
        let e = o.apply(&mut l).unwrap_err().to_string();
        assert!(e.contains("--cpu-time"), "{e}");
        let o = LimitOverrides {
            file_size: Some("0.4".into()),
            ..Default::default()
        };
        let e = o.apply(&mut l).unwrap_err().to_string();
        assert!(e.contains("--file-size"), "{e}");
        // 0 still lifts it, and a request's megabytes are far above the floor.
        let o = LimitOverrides {
            memory: Some("0".into()),
            ..Default::default()
        };
        o.apply(&mut l).unwrap();
        assert_eq!(l.memory, None);
    }

    #[test]
    fn limit_errors_name_what_set_them_and_zero_means_what_it_says() {
        let over = |f: fn(&mut LimitOverrides)| {
            let mut o = LimitOverrides::default();
            f(&mut o);
            o
        };
        let zero_timeout = over(|o| o.timeout = Some("0".into()));
        let mut l = Limits::default();
        for (naming, name) in [
            (LimitNaming::Flags, "--timeout"),
            (LimitNaming::CompileFlags, "--compile-timeout"),
            (LimitNaming::Profile, "invalid timeout"),
            (LimitNaming::Request, "config.timeout"),
            (LimitNaming::CompileRequest, "config.compileTimeout"),
        ] {
            let e = zero_timeout
                .apply_named(&mut l, naming)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(name) && e.contains("cannot be lifted"),
                "{naming:?}: {e}"
            );
        }
        let e = over(|o| o.output_limit = Some("0".into()))
            .apply(&mut l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--output-limit"), "{e}");
        let e = over(|o| o.memory = Some("lots".into()))
            .apply_named(&mut l, LimitNaming::Profile)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid memory `lots`"), "{e}");
        // A negative or infinite CPU count is no "no limit".
        for c in [-1.0, f64::INFINITY, f64::NAN] {
            let e = LimitOverrides {
                cpus: Some(c),
                ..LimitOverrides::default()
            }
            .apply(&mut Limits::default())
            .map(|_| ())
            .map_err(|e| e.to_string());
            assert!(
                e.as_ref().is_err_and(|e| e.contains("--cpus")),
                "{c}: {e:?}"
            );
        }
        // 0 lifts the CPU-time limit.
        let mut l = Limits {
            cpu_time: Some(std::time::Duration::from_secs(1)),
            ..Limits::default()
        };
        over(|o| o.cpu_time = Some("0".into()))
            .apply(&mut l)
            .unwrap();
        assert_eq!(l.cpu_time, None);
    }

    #[test]
    fn builtins_parse_and_compiled_ones_have_artifacts() {
        let all = all(&[]).unwrap();
        for name in ["python", "node", "go", "rust", "bash"] {
            assert!(all.contains_key(name), "{name}");
        }
        assert!(
            all["go"].is_compiled() && all["rust"].is_compiled() && !all["python"].is_compiled()
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let base = "name = \"x\"\ndescription = \"d\"\nsource = \"a.x\"\nrun = [\"x\"]\n";
        assert!(Profile::parse(base, "t").is_ok());
        let e = Profile::parse(&format!("{base}colour = \"red\"\n"), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        assert!(Profile::parse(&format!("{base}compile = [\"cc\"]\n"), "t").is_err());
        assert!(Profile::parse(&base.replace("a.x", "../a.x"), "t").is_err());
        assert!(Profile::parse(&format!("{base}[limits]\nmemory = \"lots\"\n"), "t").is_err());
        assert!(Profile::parse(&format!("{base}seccomp = \"none\"\n"), "t").is_err());
        assert!(Profile::parse(&format!("{base}[limits]\nmemroy = \"1G\"\n"), "t").is_err());
    }

    #[test]
    fn limits_take_text_or_numbers_and_say_what_else_is_wrong() {
        let base = "name = \"x\"\ndescription = \"d\"\nsource = \"a.x\"\nrun = [\"x\"]\n";
        let p = Profile::parse(
            &format!("{base}[limits]\ntimeout = 7\nmemory = \"64M\"\ncpu_time = 1.5\n"),
            "t",
        )
        .unwrap();
        assert_eq!(p.limits.timeout.as_deref(), Some("7"));
        assert_eq!(p.limits.memory.as_deref(), Some("64M"));
        assert_eq!(p.limits.cpu_time.as_deref(), Some("1.5"));
        let e = Profile::parse(&format!("{base}[limits]\ntimeout = [1]\n"), "t")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a duration or size") && !e.contains("untagged"),
            "{e}"
        );
        // JSON requests: null is "not set", a boolean is an error naming what is expected.
        let o: LimitOverrides =
            serde_json::from_str(r#"{"timeout": null, "memory": 1024}"#).unwrap();
        assert_eq!((o.timeout, o.memory.as_deref()), (None, Some("1024")));
        let e = serde_json::from_str::<LimitOverrides>(r#"{"timeout": true}"#).unwrap_err();
        assert!(e.to_string().contains("a duration or size"), "{e}");
    }

    /// A profile's [limits] may set the collection's caps (text or numbers, checked when it
    /// loads, naming the key); [compile_limits] and [packages.limits] may not, as a compile
    /// collects only its artifact and an install nothing.
    #[test]
    fn a_profile_sets_the_collection_caps_in_its_run_limits_only() {
        let base = "name = \"x\"\ndescription = \"d\"\nsource = \"a.x\"\nrun = [\"x\"]\n";
        let p = Profile::parse(
            &format!("{base}[limits]\ncollect_files = 5000\ncollect_size = \"200M\"\n"),
            "t",
        )
        .unwrap();
        let mut c = Collect::default();
        p.limits.apply_collect(&mut c).unwrap();
        assert_eq!((c.max_files, c.max_bytes), (5000, 200 << 20));
        let p = Profile::parse(&format!("{base}[limits]\ncollect_size = 1048576\n"), "t").unwrap();
        assert_eq!(p.limits.collect_size.as_deref(), Some("1048576"));
        for (limits, want) in [
            (
                "[limits]\ncollect_files = 0\n",
                "invalid collect_files `0`: give 1 to 100000",
            ),
            (
                "[limits]\ncollect_size = \"2G\"\n",
                "invalid collect_size `2G`: give 1 byte to 1G",
            ),
            (
                "[compile_limits]\ncollect_files = 10\n",
                "belong in [limits]",
            ),
            (
                "[compile_limits]\ncollect_size = \"1M\"\n",
                "belong in [limits]",
            ),
        ] {
            let e = Profile::parse(&format!("{base}{limits}"), "t")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{limits}: {e}");
        }
        let e = Profile::parse(
            &format!(
                "{base}[packages]\ninstaller = \"pip\"\nindex = \"https://pypi.org/simple\"\n[packages.limits]\ncollect_files = 10\n"
            ),
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("[packages.limits]") && e.contains("belong in [limits]"),
            "{e}"
        );
        // The flags' and a request's names.
        let o = LimitOverrides {
            collect_files: Some(100_001),
            ..Default::default()
        };
        let e = o.apply(&mut Limits::default()).unwrap_err().to_string();
        assert!(e.contains("invalid --collect-files `100001`"), "{e}");
        let o = LimitOverrides {
            collect_size: Some("0".into()),
            naming: LimitNaming::Request,
            ..Default::default()
        };
        let e = o
            .apply_collect(&mut Collect::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid config.collectSize `0`"), "{e}");
    }

    #[test]
    fn the_language_is_told_from_the_files_extension_or_the_one_profile_given() {
        let f = |name: &str| Some(PathBuf::from(name));
        for (file, lang) in [
            ("chart.py", "python"),
            ("x/app.js", "node"),
            ("main.go", "go"),
            ("a.rs", "rust"),
            ("run.sh", "bash"),
            ("run.bash", "bash"),
            ("module.mjs", "node"),
            ("common.cjs", "node"),
        ] {
            assert_eq!(infer(f(file).as_deref(), &[]).unwrap(), lang, "{file}");
        }
        let e = infer(f("notes.txt").as_deref(), &[]).unwrap_err();
        assert!(
            e.contains("--lang")
                && e.contains("no profile takes .txt files")
                && e.contains("python"),
            "{e}"
        );
        assert!(
            infer(None, &[])
                .unwrap_err()
                .starts_with("give the language with --lang (")
        );
        assert!(infer(f("-").as_deref(), &[]).is_err());
        // One --profile: its language, for -c and for files of its own extension.
        let dir = tempfile::tempdir().unwrap();
        let ruby = dir.path().join("ruby.toml");
        std::fs::write(&ruby, "name = \"ruby\"\ndescription = \"Ruby\"\nsource = \"main.rb\"\nrun = [\"ruby\", \"{source}\"]\n").unwrap();
        let extra = [ruby];
        assert_eq!(infer(None, &extra).unwrap(), "ruby");
        assert_eq!(infer(f("x.rb").as_deref(), &extra).unwrap(), "ruby");
        assert_eq!(infer(f("x.py").as_deref(), &extra).unwrap(), "python");
    }

    #[test]
    fn aliases_and_expansion() {
        let p = find("py", &[]).unwrap();
        assert_eq!(p.name, "python");
        // Names and aliases in any case.
        for lang in ["Python", "PYTHON", "Py", "JavaScript", "Node"] {
            assert!(find(lang, &[]).is_ok(), "{lang}");
        }
        let r = find("rust", &[]).unwrap();
        let argv = r.expand(r.compile.as_ref().unwrap(), "main.rs");
        assert!(argv.contains(&"main.rs".to_string()) && argv.contains(&"main".to_string()));
        assert!(matches!(find("cobol", &[]), Err(ProfileError::Unknown(..))));
    }

    #[test]
    fn overrides_apply() {
        let o = LimitOverrides {
            timeout: Some("5s".into()),
            memory: Some("0".into()),
            pids: Some(7),
            ..Default::default()
        };
        let mut l = Limits::default();
        o.apply(&mut l).unwrap();
        assert_eq!(l.wall, std::time::Duration::from_secs(5));
        assert_eq!(l.memory, None);
        assert_eq!(l.pids, Some(7));

        let inodes = |v: u64| LimitOverrides {
            workspace_inodes: Some(v),
            ..Default::default()
        };
        inodes(100).apply(&mut l).unwrap();
        assert_eq!(l.workspace_inodes, 100);
        let e = inodes(0).apply(&mut l).unwrap_err();
        assert!(e.to_string().contains("--workspace-inodes"), "{e}");
        let e = inodes(0)
            .apply_named(&mut l, LimitNaming::Profile)
            .unwrap_err();
        assert!(e.to_string().contains("invalid workspace_inodes"), "{e}");
        let size0 = LimitOverrides {
            tmp_size: Some("0".into()),
            ..Default::default()
        };
        assert!(
            size0
                .apply(&mut l)
                .unwrap_err()
                .to_string()
                .contains("no cap")
        );
    }
}

//! A pip set that shadows the root filesystem's own Python distributions.
//!
//! The set comes first on the path (`PYTHONPATH=/deps/python`), so a distribution that both
//! have is the set's. When the versions differ, the root filesystem's packages that depend on
//! it may no longer import: Debian's pandas 1.5 was compiled against numpy 1.24's C API, and
//! `--packages numpy` (numpy 2) leaves `import pandas` with "numpy.dtype size changed, may
//! indicate binary incompatibility". `pip install --target` does not look at what the root
//! filesystem has, so it cannot avoid this itself.
//!
//! [`find`] compares the set's `*.dist-info` with the root filesystem's `*.dist-info` and
//! `*.egg-info` (names normalized as PEP 503 does, versions without a local `+...` part)
//! and names, for each distribution shadowed at another version, the root filesystem's
//! distributions that depend on it and that the set does not replace too. Their Python
//! metadata alone misses most of them (Debian removes `numpy` from pandas' and matplotlib's
//! requirements, which dpkg holds instead), so dpkg's database is read too when the root
//! filesystem has one: the Debian packages that depend on the shadowed distribution's
//! package (or on what it provides, `python3-numpy-abi9`), and the distributions those hold.
//!
//! Everything is read as the caller, from a root filesystem the caller (or root) built or
//! the host's own; each file is read up to a cap, so a large file costs a bounded amount.

use crate::outcome::ShadowedDistribution;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most bytes read of dpkg's status file, of one `.list` file, of one metadata file.
const MAX_STATUS: u64 = 32 << 20;
const MAX_LIST: u64 = 8 << 20;
const MAX_METADATA: u64 = 4 << 20;
/// ...and of all the `.list` files together.
const MAX_LISTS: u64 = 64 << 20;

/// A distribution's name as PEP 503 normalizes it: lower case, runs of `-`, `_`, `.` as `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.extend(c.to_lowercase());
    }
    out
}

/// One installed distribution: its normalized name, version, and metadata path.
#[derive(Debug, Clone)]
struct Dist {
    name: String,
    version: String,
    meta: PathBuf,
}

/// The distributions whose metadata (`NAME-VERSION[-...].dist-info` or `.egg-info`, a
/// directory or, for an old egg-info, a file) is in `dir`.
fn dists_in(dir: &Path) -> Vec<Dist> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let file_name = e.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let Some(stem) = file_name
            .strip_suffix(".dist-info")
            .or_else(|| file_name.strip_suffix(".egg-info"))
        else {
            continue;
        };
        let mut parts = stem.splitn(3, '-');
        let (Some(name), Some(version)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(version) = plain_version(version) else {
            continue;
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            continue;
        }
        out.push(Dist {
            name: normalize(name),
            version: version.to_string(),
            meta: e.path(),
        });
    }
    out
}

/// A version without its local part (`4.0.2+dfsg` is upstream's `4.0.2`).
fn public_version(v: &str) -> &str {
    v.split('+').next().unwrap_or(v)
}

/// Reads at most `cap` bytes of a regular file (lossy UTF-8); None if it is not one. The
/// last component is not followed if it is a symlink, and the open does not wait (a FIFO
/// planted where a metadata file goes is refused at once, not read from forever).
fn read_capped(path: &Path, cap: u64) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(cap).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// A version as it may be shown in a report: PEP 440's characters only (it comes from a
/// directory name that a package chose, which could otherwise carry any text into cordon's
/// advice), at most 64 of them.
fn plain_version(v: &str) -> Option<&str> {
    (!v.is_empty()
        && v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '_' | '-')))
    .then_some(v)
}

/// The leading name of a requirement (`numpy>=1.21; python_version>"3"` → `numpy`).
fn requirement_name(req: &str) -> Option<String> {
    let name: String = req
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    (!name.is_empty()).then(|| normalize(&name))
}

/// What a distribution requires unconditionally or under an environment marker (not for an
/// extra), by its metadata: `requires.txt` in an egg-info directory, `Requires-Dist:` in a
/// dist-info's `METADATA` or an egg-info's `PKG-INFO` (or the egg-info file itself).
fn requirements(d: &Dist) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let meta = if d.meta.is_dir() {
        if let Some(text) = read_capped(&d.meta.join("requires.txt"), MAX_METADATA) {
            let mut wanted = true;
            for line in text.lines() {
                let line = line.trim();
                if let Some(section) = line.strip_prefix('[') {
                    // `[extra]` and `[extra:marker]` are an extra's; `[:marker]` is not.
                    wanted = section.starts_with(':');
                    continue;
                }
                if wanted && let Some(n) = requirement_name(line) {
                    out.insert(n);
                }
            }
        }
        ["METADATA", "PKG-INFO"]
            .iter()
            .find_map(|f| read_capped(&d.meta.join(f), MAX_METADATA))
    } else {
        read_capped(&d.meta, MAX_METADATA)
    };
    for line in meta.unwrap_or_default().lines() {
        if line.is_empty() {
            break; // the headers end; the description follows
        }
        if let Some(req) = line.strip_prefix("Requires-Dist:") {
            let marker = req.split_once(';').map(|(_, m)| m).unwrap_or("");
            if !marker.contains("extra")
                && let Some(n) = requirement_name(req)
            {
                out.insert(n);
            }
        }
    }
    out
}

/// dpkg's view of the root filesystem: installed packages, what each provides and depends
/// on, and the Python distributions each holds.
#[derive(Default)]
struct Dpkg {
    /// Package → the names in its Depends and Pre-Depends.
    depends: BTreeMap<String, BTreeSet<String>>,
    /// Package → the names it provides.
    provides: BTreeMap<String, BTreeSet<String>>,
    /// A distribution's metadata path (`/usr/lib/python3/dist-packages/numpy-1.24.2.egg-info`)
    /// → the package that holds it.
    meta_owner: BTreeMap<String, String>,
    /// Package → the Python distributions it holds, by its file list: the metadata
    /// directories in a `dist-packages` directory, or, for a package without any (Debian's
    /// `-lib` halves, `python3-pandas-lib`), its top-level modules there.
    distributions: BTreeMap<String, BTreeSet<String>>,
}

impl Dpkg {
    /// Reads `var/lib/dpkg` under `root`; None without a status file.
    fn read(root: &Path) -> Option<Dpkg> {
        let db = root.join("var/lib/dpkg");
        let status = read_capped(&db.join("status"), MAX_STATUS)?;
        let mut d = Dpkg::default();
        for para in status.split("\n\n") {
            // Fields, with continuation lines joined.
            let mut fields: Vec<(&str, String)> = Vec::new();
            for line in para.lines() {
                if line.starts_with([' ', '\t']) {
                    if let Some(last) = fields.last_mut() {
                        last.1.push(' ');
                        last.1.push_str(line.trim());
                    }
                } else if let Some((k, v)) = line.split_once(':') {
                    fields.push((k, v.trim().to_string()));
                }
            }
            let get = |k: &str| {
                fields
                    .iter()
                    .find(|(f, _)| *f == k)
                    .map(|(_, v)| v.as_str())
            };
            let (Some(pkg), Some(st)) = (get("Package"), get("Status")) else {
                continue;
            };
            if !st.ends_with(" installed") {
                continue;
            }
            // `a (>= 1) | b, c:any` → a, b, c
            let names = |v: Option<&str>| -> BTreeSet<String> {
                v.unwrap_or("")
                    .split([',', '|'])
                    .filter_map(|alt| {
                        let n = alt.trim().split([' ', '(', ':']).next()?;
                        (!n.is_empty()).then(|| n.to_string())
                    })
                    .collect()
            };
            let mut deps = names(get("Depends"));
            deps.extend(names(get("Pre-Depends")));
            d.depends.insert(pkg.to_string(), deps);
            d.provides.insert(pkg.to_string(), names(get("Provides")));
        }
        let Ok(rd) = std::fs::read_dir(db.join("info")) else {
            return Some(d);
        };
        // All the file lists together are read up to a cap too.
        let mut budget = MAX_LISTS;
        for e in rd.flatten() {
            let n = e.file_name();
            // `name:arch.list` for a multi-arch package.
            let Some(pkg) = n
                .to_str()
                .and_then(|n| n.strip_suffix(".list"))
                .and_then(|n| n.split(':').next())
            else {
                continue;
            };
            if !d.depends.contains_key(pkg) {
                continue;
            }
            if budget == 0 {
                break;
            }
            let Some(text) = read_capped(&e.path(), MAX_LIST.min(budget)) else {
                continue;
            };
            budget = budget.saturating_sub(text.len() as u64);
            let mut dists = BTreeSet::new();
            let mut tops = BTreeSet::new();
            for line in text.lines() {
                let Some((_, rest)) = line.split_once("/dist-packages/") else {
                    continue;
                };
                let (top, below) = rest.split_once('/').unwrap_or((rest, ""));
                if let Some(stem) = top
                    .strip_suffix(".dist-info")
                    .or_else(|| top.strip_suffix(".egg-info"))
                {
                    if below.is_empty() {
                        d.meta_owner.insert(line.to_string(), pkg.to_string());
                    }
                    if let Some(name) = stem.split('-').next().filter(|n| !n.is_empty()) {
                        dists.insert(normalize(name));
                    }
                } else if !below.is_empty()
                    && !top.starts_with(['_', '.'])
                    && top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    tops.insert(normalize(top));
                }
            }
            let held = if dists.is_empty() { tops } else { dists };
            if !held.is_empty() {
                d.distributions.insert(pkg.to_string(), held);
            }
        }
        Some(d)
    }

    /// The packages that depend on `pkg` or on a name it provides.
    fn dependents(&self, pkg: &str) -> Vec<&str> {
        let mut names: BTreeSet<&str> = BTreeSet::from([pkg]);
        if let Some(p) = self.provides.get(pkg) {
            names.extend(p.iter().map(String::as_str));
        }
        self.depends
            .iter()
            .filter(|(p, deps)| {
                p.as_str() != pkg && deps.iter().any(|d| names.contains(d.as_str()))
            })
            .map(|(p, _)| p.as_str())
            .collect()
    }
}

/// The root filesystem's distributions that the set's distributions shadow at another
/// version, each with the root filesystem's distributions that depend on it and that the
/// set does not hold. `set_python` is the set's `python` directory, `root` the root
/// filesystem's top and `site_dirs` its `dist-packages` directories, as the host sees them.
pub fn find(set_python: &Path, root: &Path, site_dirs: &[PathBuf]) -> Vec<ShadowedDistribution> {
    let set: BTreeMap<String, Dist> = dists_in(set_python)
        .into_iter()
        .map(|d| (d.name.clone(), d))
        .collect();
    if set.is_empty() {
        return Vec::new();
    }
    let mut rootfs: BTreeMap<String, Dist> = BTreeMap::new();
    for dir in site_dirs {
        for d in dists_in(dir) {
            rootfs.entry(d.name.clone()).or_insert(d);
        }
    }
    let shadowed: Vec<(&Dist, &Dist)> = set
        .values()
        .filter_map(|s| {
            let r = rootfs.get(&s.name)?;
            (public_version(&s.version) != public_version(&r.version)).then_some((s, r))
        })
        .collect();
    if shadowed.is_empty() {
        return Vec::new();
    }
    let dpkg = Dpkg::read(root);
    let reqs: BTreeMap<&str, BTreeSet<String>> = rootfs
        .values()
        .map(|d| (d.name.as_str(), requirements(d)))
        .collect();
    shadowed
        .into_iter()
        .map(|(s, r)| {
            let mut dependents: BTreeSet<String> = reqs
                .iter()
                .filter(|(_, req)| req.contains(&r.name))
                .map(|(n, _)| n.to_string())
                .collect();
            if let Some(dpkg) = &dpkg {
                let meta = r
                    .meta
                    .strip_prefix(root)
                    .ok()
                    .map(|p| Path::new("/").join(p).to_string_lossy().into_owned());
                if let Some(pkg) = meta.as_deref().and_then(|m| dpkg.meta_owner.get(m)) {
                    for dep in dpkg.dependents(pkg) {
                        dependents
                            .extend(dpkg.distributions.get(dep).into_iter().flatten().cloned());
                    }
                }
            }
            dependents.remove(&r.name);
            dependents.retain(|d| !set.contains_key(d));
            ShadowedDistribution {
                name: s.name.clone(),
                version: s.version.clone(),
                rootfs_version: r.version.clone(),
                dependents: dependents.into_iter().collect(),
            }
        })
        .collect()
}

/// What [`find`]'s answer for a set depends on, as one line: the device, inode, size, link
/// count and modification time of the set's `python` directory, dpkg's status file and `info`
/// directory, and each site directory. Installing or removing a Debian package replaces the
/// status file, and adding or removing a distribution changes its site directory.
fn fingerprint(set_python: &Path, root: &Path, site_dirs: &[PathBuf]) -> String {
    use std::os::unix::fs::MetadataExt;
    let db = root.join("var/lib/dpkg");
    [set_python.to_path_buf(), db.join("status"), db.join("info")]
        .iter()
        .chain(site_dirs)
        .map(|p| match std::fs::metadata(p) {
            // The link count too: a directory's grows with each subdirectory (a dist-info)
            // even where two changes share a timestamp (file times move by clock ticks).
            Ok(m) => format!(
                "{}:{}:{}:{}:{}.{}",
                m.dev(),
                m.ino(),
                m.len(),
                m.nlink(),
                m.mtime(),
                m.mtime_nsec()
            ),
            Err(_) => "-".to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`find`], kept in `cache` (a file of the caller's private dependency cache, next to the
/// set) with the [`fingerprint`] it was computed for: a later run of the same set on an
/// unchanged root filesystem reads it back instead of dpkg's database (reading that took
/// about 0.1 s per run here, 8 MB of file lists). A missing, unreadable or stale file is
/// computed again and replaced; failing to write it only costs the next run the same time.
pub fn find_cached(
    cache: &Path,
    set_python: &Path,
    root: &Path,
    site_dirs: &[PathBuf],
) -> Vec<ShadowedDistribution> {
    let key = fingerprint(set_python, root, site_dirs);
    if let Some(text) = read_capped(cache, MAX_METADATA)
        && let Some((kept, body)) = text.split_once('\n')
        && kept == key
        && let Ok(found) = serde_json::from_str(body)
    {
        return found;
    }
    let found = find(set_python, root, site_dirs);
    if let Ok(body) = serde_json::to_string(&found) {
        // Its temp file is named `.tmp-…` like an install's temp directory: one a crash
        // leaves is swept with those.
        let _ = crate::cache::replace_file(cache, format!("{key}\n{body}").as_bytes(), 0o644);
    }
    found
}

/// The line of a failed Python program's stderr that says an extension module does not fit
/// the version of a package it was compiled against (numpy's words, and the dynamic
/// linker's).
pub fn binary_incompatibility(stderr: &str) -> Option<&str> {
    const MARKERS: &[&str] = &[
        "may indicate binary incompatibility",
        "compiled using NumPy 1.x cannot be run in",
        "_ARRAY_API not found",
        "numpy.core.multiarray failed to import",
        "module compiled against API version",
        "module compiled against ABI version",
        "undefined symbol:",
    ];
    // The last such line: the error that ended the program (a traceback quotes source
    // lines before it).
    stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| MARKERS.iter().any(|m| l.contains(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root filesystem with Debian's layout: pandas' and matplotlib's Python metadata do
    /// not name numpy (Debian drops it), dpkg's Depends do; a `-lib` package holds pandas'
    /// compiled half; scipy's dist-info names numpy itself.
    fn debian_root(root: &Path) {
        let site = root.join("usr/lib/python3/dist-packages");
        let meta = |d: &str, files: &[(&str, &str)]| {
            std::fs::create_dir_all(site.join(d)).unwrap();
            for (f, text) in files {
                std::fs::write(site.join(d).join(f), text).unwrap();
            }
        };
        meta(
            "numpy-1.24.2.egg-info",
            &[("PKG-INFO", "Name: numpy\nVersion: 1.24.2\n")],
        );
        meta(
            "pandas-1.5.3.egg-info",
            &[(
                "requires.txt",
                "\n[:python_version >= \"3.11\"]\n\n[test]\nnumpy>=1\n",
            )],
        );
        meta(
            "matplotlib-3.6.3.egg-info",
            &[("PKG-INFO", "Name: matplotlib\n")],
        );
        meta(
            "scipy-1.10.1.dist-info",
            &[(
                "METADATA",
                "Name: scipy\nRequires-Dist: numpy (<1.27.0,>=1.19.5)\nRequires-Dist: pytest ; extra == \"test\"\n\nnumpy is great\nRequires-Dist: not-a-header\n",
            )],
        );
        meta("six-1.16.0.egg-info", &[]);
        meta(
            "python_dateutil-2.8.2.egg-info",
            &[("requires.txt", "six>=1.5\n")],
        );
        meta("lz4-4.0.2+dfsg.egg-info", &[]);
        let db = root.join("var/lib/dpkg");
        std::fs::create_dir_all(db.join("info")).unwrap();
        std::fs::write(
            db.join("status"),
            "Package: python3-numpy\nStatus: install ok installed\nProvides: python3-f2py, python3-numpy-abi9\nDepends: libc6 (>= 2.34),\n python3 (<< 3.12)\n\n\
             Package: python3-pandas\nStatus: install ok installed\nDepends: python3-numpy, python3-pandas-lib (>= 1.5.3)\n\n\
             Package: python3-pandas-lib\nStatus: install ok installed\nDepends: python3-numpy-abi9, libc6\n\n\
             Package: python3-matplotlib\nStatus: install ok installed\nDepends: python3-dateutil | python3-other, python3-numpy:any (>= 1:1.22)\n\n\
             Package: python3-gone\nStatus: deinstall ok config-files\nDepends: python3-numpy\n\n\
             Package: python3-six\nStatus: install ok installed\n\n\
             Package: python3-dateutil\nStatus: install ok installed\nDepends: python3-six\n",
        )
        .unwrap();
        let d = "/usr/lib/python3/dist-packages";
        for (pkg, lines) in [
            (
                "python3-numpy",
                vec![
                    format!("{d}/numpy-1.24.2.egg-info"),
                    format!("{d}/numpy-1.24.2.egg-info/PKG-INFO"),
                    format!("{d}/numpy/__init__.py"),
                ],
            ),
            (
                "python3-pandas",
                vec![
                    format!("{d}/pandas-1.5.3.egg-info"),
                    format!("{d}/pandas/__init__.py"),
                ],
            ),
            (
                "python3-pandas-lib",
                vec![format!("{d}/pandas/_libs/lib.so"), format!("{d}/pandas")],
            ),
            (
                "python3-matplotlib:amd64",
                vec![
                    format!("{d}/matplotlib-3.6.3.egg-info"),
                    format!("{d}/mpl_toolkits/__init__.py"),
                ],
            ),
            (
                "python3-six",
                vec![format!("{d}/six-1.16.0.egg-info"), format!("{d}/six.py")],
            ),
            (
                "python3-dateutil",
                vec![format!("{d}/python_dateutil-2.8.2.egg-info")],
            ),
        ] {
            std::fs::write(
                db.join("info").join(format!("{pkg}.list")),
                lines.join("\n") + "\n",
            )
            .unwrap();
        }
    }

    #[test]
    fn a_set_that_shadows_the_rootfs_names_what_depends_on_it() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        debian_root(&root);
        let set = t.path().join("python");
        for d in [
            "numpy-2.4.6.dist-info",
            "six-1.16.0.dist-info",
            "lz4-4.0.2.dist-info",
            "Python_Dateutil-2.9.0.dist-info",
            "only_in_the_set-1.0.dist-info",
            "matplotlib-3.10.0.dist-info",
        ] {
            std::fs::create_dir_all(set.join(d)).unwrap();
        }
        let site = [root.join("usr/lib/python3/dist-packages")];
        let found = find(&set, &root, &site);
        let brief: Vec<(&str, &str, &str, Vec<&str>)> = found
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.version.as_str(),
                    s.rootfs_version.as_str(),
                    s.dependents.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        // numpy: pandas by dpkg (the -lib half through its provided ABI name, the Python half
        // directly), scipy by its metadata; matplotlib is the set's own; not the package
        // that is no longer installed. The same six and (upstream) lz4 shadow nothing.
        assert_eq!(
            brief,
            [
                ("matplotlib", "3.10.0", "3.6.3", vec![]),
                ("numpy", "2.4.6", "1.24.2", vec!["pandas", "scipy"]),
                ("python-dateutil", "2.9.0", "2.8.2", vec![]),
            ]
        );
        // Without dpkg's database, the Python metadata alone: scipy.
        std::fs::remove_file(root.join("var/lib/dpkg/status")).unwrap();
        let found = find(&set, &root, &site);
        assert_eq!(found[1].dependents, ["scipy"]);
        // A set that shadows nothing.
        let plain = t.path().join("plain");
        std::fs::create_dir_all(plain.join("six-1.16.0.dist-info")).unwrap();
        assert!(find(&plain, &root, &site).is_empty());
    }

    #[test]
    fn the_answer_is_kept_until_the_root_filesystem_changes() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        debian_root(&root);
        let set = t.path().join("python");
        std::fs::create_dir_all(set.join("numpy-2.4.6.dist-info")).unwrap();
        let site = [root.join("usr/lib/python3/dist-packages")];
        let cache = t.path().join("set.shadowed");
        let first = find_cached(&cache, &set, &root, &site);
        assert_eq!(first, find(&set, &root, &site));
        assert_eq!(first[0].dependents, ["matplotlib", "pandas", "scipy"]);
        // Kept: a run that finds its fingerprint reads the file, not dpkg's database (a
        // planted answer under the right fingerprint is what comes back).
        let plant_empty_answer = || {
            let text = std::fs::read_to_string(&cache).unwrap();
            let (key, _) = text.split_once('\n').unwrap();
            std::fs::write(&cache, format!("{key}\n[]")).unwrap();
        };
        plant_empty_answer();
        assert!(find_cached(&cache, &set, &root, &site).is_empty());
        // dpkg's status rewritten (a package installed or removed; another size, so the test
        // does not depend on the file system's timestamp granularity): computed again, and kept.
        let status = root.join("var/lib/dpkg/status");
        let body = std::fs::read_to_string(&status).unwrap();
        std::fs::remove_file(&status).unwrap();
        std::fs::write(&status, body + "\n").unwrap();
        assert_eq!(find_cached(&cache, &set, &root, &site), first);
        let kept = std::fs::read_to_string(&cache).unwrap();
        assert!(
            kept.ends_with(&serde_json::to_string(&first).unwrap()),
            "{kept}"
        );
        // A distribution added to a site directory changes it too.
        plant_empty_answer();
        std::fs::create_dir_all(site[0].join("newcomer-1.0.dist-info")).unwrap();
        assert_eq!(find_cached(&cache, &set, &root, &site), first);
        // An unreadable or foreign file is no answer.
        std::fs::write(&cache, "garbage").unwrap();
        assert_eq!(find_cached(&cache, &set, &root, &site), first);
    }

    #[test]
    fn names_are_normalized() {
        assert_eq!(normalize("Python_Dateutil"), "python-dateutil");
        assert_eq!(normalize("zope.interface"), "zope-interface");
        assert_eq!(normalize("a__b--c"), "a-b-c");
    }

    /// What numpy 2 makes of a module built for numpy 1 (from runs on the python rootfs with
    /// `--packages numpy`), and errors that are not that.
    #[test]
    fn binary_incompatibility_is_recognized() {
        let pandas = "  File \"pandas/_libs/interval.pyx\", line 1, in init pandas._libs.interval\nValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject\n";
        assert_eq!(
            binary_incompatibility(pandas),
            Some(
                "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject"
            )
        );
        let matplotlib = "\nA module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.4.6 as it may crash.\n...\n    from matplotlib._path import (\nAttributeError: _ARRAY_API not found\nTraceback (most recent call last):\nImportError: numpy.core.multiarray failed to import\n";
        assert_eq!(
            binary_incompatibility(matplotlib),
            Some("ImportError: numpy.core.multiarray failed to import")
        );
        assert_eq!(
            binary_incompatibility(&matplotlib[..matplotlib.find("Traceback").unwrap()]),
            Some("AttributeError: _ARRAY_API not found")
        );
        for other in [
            "ModuleNotFoundError: No module named 'x'\n",
            "ValueError: invalid literal for int() with base 10: 'a'\n",
        ] {
            assert_eq!(binary_incompatibility(other), None, "{other}");
        }
    }
}

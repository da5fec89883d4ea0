//! The host's fontconfig set-up, for the sandbox's generated /etc/fonts/fonts.conf: the
//! configuration files under /usr that the host's /etc/fonts/conf.d enables, in its order.
//!
//! Finding them takes one `readlink` per entry of conf.d (and one more for a link into
//! /etc/fonts/conf.avail, which Debian links on to /usr): about 0.13 ms on a Debian host with
//! the usual fonts, on every start, before the sandbox is cloned. The list changes only when
//! a package or the administrator adds, removes or retargets a link there, which changes
//! conf.d's or conf.avail's change time. So the list is kept in a small file under the
//! caller's cache directory ([`cache_file`]), keyed by those two directories' device, inode
//! and change time; a start whose key matches reads it instead (three `stat`s and one read).
//!
//! What the file says is checked as the scan's own result is: each path under /usr, free of
//! `..` and of characters that XML would read as markup, at most [`MAX_INCLUDES`] of them,
//! and the file must end with the count of its lines (a file cut short is a miss). A file
//! that does not belong to the caller, or that others may write, is not read. The paths end
//! up only as `<include>`s of the sandbox's fontconfig, read inside the sandbox.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// At most this many includes are kept (conf.d holds a few dozen on a desktop).
pub const MAX_INCLUDES: usize = 256;

/// The first word of a cache file, with the format's version.
const MAGIC: &str = "cordon-fonts 1";

/// The includes the host's fontconfig enables (see the module's documentation): None without
/// `FONTS/conf.d` or `FONTS/fonts.conf` (FONTS is /etc/fonts), from the cache in `cache`
/// (a file path) when its key still matches, else scanned and written there.
pub fn host_includes(fonts: &Path, cache: Option<&Path>) -> Option<Vec<PathBuf>> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    includes(fonts, cache, now)
}

/// [`host_includes`] at `now` (seconds since the epoch).
fn includes(fonts: &Path, cache: Option<&Path>, now: i64) -> Option<Vec<PathBuf>> {
    let (key, newest) = key(fonts)?;
    if let Some(cache) = cache {
        if let Some(found) = read(cache, &key) {
            return Some(found);
        }
        let scanned = scan(fonts)?;
        // Not kept while conf.d or conf.avail changed within the last two seconds: a file
        // system that keeps whole seconds would show the same change time for a second
        // change in the same second. Best-effort: a cache that cannot be written only costs
        // the next start the scan.
        if now.saturating_sub(newest) >= 2 {
            let _ = write(cache, &key, &scanned);
        }
        return Some(scanned);
    }
    scan(fonts)
}

/// The cache file for this caller, beside its compile cache ([`crate::cache`]):
/// `$XDG_CACHE_HOME/cordon/fonts` (`~/.cache/...`), or `/var/cache/cordon/fonts` for root
/// whose /var is its own.
pub fn cache_file() -> PathBuf {
    let euid = nix::unistd::geteuid().as_raw();
    let xdg = std::env::var_os("XDG_CACHE_HOME");
    crate::cache::default_dir_for(
        crate::cache::system_dirs(),
        euid,
        xdg.as_deref(),
        crate::cache::home_dir(euid).as_deref(),
    )
    .with_file_name("fonts")
}

/// What the list depends on: conf.d's and conf.avail's device, inode and change time (a
/// link added, removed or retargeted changes its directory's), and that fonts.conf exists;
/// with the newer of the two change times (seconds). None when conf.d or fonts.conf is
/// missing (the host has no fontconfig to follow).
fn key(fonts: &Path) -> Option<(String, i64)> {
    let id =
        |m: &std::fs::Metadata| format!("{}:{}:{}.{}", m.dev(), m.ino(), m.ctime(), m.ctime_nsec());
    let conf_d = std::fs::metadata(fonts.join("conf.d")).ok()?;
    if !conf_d.is_dir() || !fonts.join("fonts.conf").exists() {
        return None;
    }
    let avail = std::fs::metadata(fonts.join("conf.avail")).ok();
    let newest = conf_d.ctime().max(avail.as_ref().map_or(0, |m| m.ctime()));
    let avail = avail.map_or_else(|| "-".into(), |m| id(&m));
    Some((format!("{} {avail}", id(&conf_d)), newest))
}

/// The includes, scanned: conf.d's `*.conf` entries in order, each followed to a path under
/// /usr (once more through a relative link into conf.avail); entries that lead elsewhere (a
/// file of the host's /etc) are left out, as the rest of its /etc is.
fn scan(fonts: &Path) -> Option<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(fonts.join("conf.d"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "conf"))
        .collect();
    names.sort();
    let follow = |link: &Path| -> Option<PathBuf> {
        let t = std::fs::read_link(link).ok()?;
        Some(if t.is_absolute() {
            t
        } else {
            link.parent()?.join(t)
        })
    };
    Some(
        names
            .iter()
            .filter_map(|p| {
                let t = follow(p)?;
                if t.starts_with("/usr/") {
                    return Some(t);
                }
                // `../conf.avail/x.conf` → /etc/fonts/conf.d/../conf.avail: once more.
                let t = follow(&t)?;
                t.starts_with("/usr/").then_some(t)
            })
            .filter(|t| acceptable(t))
            .take(MAX_INCLUDES)
            .collect(),
    )
}

/// Whether `path` may become an `<include>` of the sandbox's fonts.conf: under /usr, no
/// `..`, nothing XML would read as markup, no control character.
fn acceptable(path: &Path) -> bool {
    path.starts_with("/usr/")
        && !path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        && path.to_str().is_some_and(|s| {
            !s.contains(['<', '>', '&', '"', '\'']) && !s.chars().any(char::is_control)
        })
}

/// The cached list, if `cache` is the caller's own file, not writable by others, written for
/// `key`, whole (its last line counts the paths) and every path [`acceptable`].
fn read(cache: &Path, key: &str) -> Option<Vec<PathBuf>> {
    use std::io::Read;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(cache)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file()
        || meta.uid() != nix::unistd::geteuid().as_raw()
        || meta.mode() & 0o022 != 0
        || meta.len() > 64 << 10
    {
        return None;
    }
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    let mut lines = text.lines();
    if lines.next()? != format!("{MAGIC} {key}") {
        return None;
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    for line in lines {
        if let Some(count) = line.strip_prefix("end ") {
            return (count.parse::<usize>().ok()? == paths.len()).then_some(paths);
        }
        let p = PathBuf::from(line);
        if !acceptable(&p) || paths.len() == MAX_INCLUDES {
            return None;
        }
        paths.push(p);
    }
    None
}

/// Writes the list for `key` to `cache`, whole or not at all (mode 0600), in a directory made
/// mode 0700 if missing.
fn write(cache: &Path, key: &str, paths: &[PathBuf]) -> std::io::Result<()> {
    let dir = cache.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut text = format!("{MAGIC} {key}\n");
    for p in paths {
        // Scanned paths passed `acceptable`, so each is UTF-8 without a newline.
        text.push_str(&p.to_string_lossy());
        text.push('\n');
    }
    text.push_str(&format!("end {}\n", paths.len()));
    crate::cache::replace_file(cache, text.as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fontconfig directory like Debian's: conf.d links to /usr, to conf.avail (a link on
    /// to /usr, and a plain file of /etc), a non-.conf entry, and fonts.conf.
    fn host(dir: &Path) -> PathBuf {
        let fonts = dir.join("fonts");
        std::fs::create_dir_all(fonts.join("conf.d")).unwrap();
        std::fs::create_dir_all(fonts.join("conf.avail")).unwrap();
        std::fs::write(fonts.join("fonts.conf"), "<fontconfig/>").unwrap();
        let d = fonts.join("conf.d");
        symlink(
            "/usr/share/fontconfig/conf.avail/10-a.conf",
            d.join("10-a.conf"),
        )
        .unwrap();
        symlink("../conf.avail/20-b.conf", d.join("20-b.conf")).unwrap();
        symlink(
            "/usr/share/fontconfig/conf.avail/20-b.conf",
            fonts.join("conf.avail/20-b.conf"),
        )
        .unwrap();
        symlink("../conf.avail/30-local.conf", d.join("30-local.conf")).unwrap();
        std::fs::write(fonts.join("conf.avail/30-local.conf"), "<fontconfig/>").unwrap();
        std::fs::write(d.join("README"), "not a conf").unwrap();
        fonts
    }

    fn expected() -> Vec<PathBuf> {
        vec![
            "/usr/share/fontconfig/conf.avail/10-a.conf".into(),
            "/usr/share/fontconfig/conf.avail/20-b.conf".into(),
        ]
    }

    #[test]
    fn the_cache_file_sits_beside_the_compile_cache() {
        let compile = crate::cache::Cache::default_dir();
        assert_eq!(cache_file(), compile.with_file_name("fonts"));
    }

    #[test]
    fn the_scan_follows_conf_d_to_usr_and_leaves_etc_files_out() {
        let t = tempfile::tempdir().unwrap();
        let fonts = host(t.path());
        assert_eq!(host_includes(&fonts, None), Some(expected()));
        std::fs::remove_file(fonts.join("fonts.conf")).unwrap();
        assert_eq!(
            host_includes(&fonts, None),
            None,
            "no fonts.conf: no fontconfig"
        );
    }

    #[test]
    fn a_cached_list_is_used_while_conf_d_is_unchanged() {
        let t = tempfile::tempdir().unwrap();
        let fonts = host(t.path());
        let cache = t.path().join("cache/fonts");
        // Not kept while conf.d changed within the last two seconds (whole-second change
        // times could not tell a second change in the same second).
        let (_, newest) = key(&fonts).unwrap();
        assert_eq!(includes(&fonts, Some(&cache), newest + 1), Some(expected()));
        assert!(
            !cache.exists(),
            "kept a list of a conf.d changed a second ago"
        );
        let later = i64::MAX;
        assert_eq!(includes(&fonts, Some(&cache), later), Some(expected()));
        let text = std::fs::read_to_string(&cache).unwrap();
        assert!(
            text.starts_with(MAGIC) && text.ends_with("end 2\n"),
            "{text}"
        );
        // A hit is read, not scanned: a list written for the same key is what comes back.
        let k = key(&fonts).unwrap().0;
        let other = vec![PathBuf::from("/usr/share/other.conf")];
        write(&cache, &k, &other).unwrap();
        assert_eq!(includes(&fonts, Some(&cache), i64::MAX), Some(other));
        // A link added to conf.d changes its change time: scanned again.
        std::thread::sleep(std::time::Duration::from_millis(10));
        symlink(
            "/usr/share/fontconfig/conf.avail/40-c.conf",
            fonts.join("conf.d/40-c.conf"),
        )
        .unwrap();
        let mut more = expected();
        more.push("/usr/share/fontconfig/conf.avail/40-c.conf".into());
        assert_eq!(includes(&fonts, Some(&cache), i64::MAX), Some(more.clone()));
        // So does one retargeted in conf.avail.
        std::thread::sleep(std::time::Duration::from_millis(10));
        let b = fonts.join("conf.avail/20-b.conf");
        std::fs::remove_file(&b).unwrap();
        symlink("/usr/share/elsewhere/20-b.conf", &b).unwrap();
        more[1] = "/usr/share/elsewhere/20-b.conf".into();
        assert_eq!(includes(&fonts, Some(&cache), i64::MAX), Some(more));
    }

    #[test]
    fn a_cache_file_that_is_cut_short_or_says_too_much_is_a_miss() {
        let t = tempfile::tempdir().unwrap();
        let fonts = host(t.path());
        let cache = t.path().join("fonts-cache");
        let k = key(&fonts).unwrap().0;
        let cases = [
            format!("{MAGIC} {k}\n/usr/share/a.conf\n"),
            format!("{MAGIC} {k}\n/usr/share/a.conf\nend 2\n"),
            format!("{MAGIC} {k}\n/etc/fonts/local.conf\nend 1\n"),
            format!("{MAGIC} {k}\n/usr/share/../../etc/x.conf\nend 1\n"),
            format!("{MAGIC} {k}\n/usr/share/a\"/><dir>/\nend 1\n"),
            format!("{MAGIC} other-key\n/usr/share/a.conf\nend 1\n"),
        ];
        for text in cases {
            std::fs::write(&cache, &text).unwrap();
            std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            assert_eq!(read(&cache, &k), None, "{text}");
            // And the scan's result replaces it.
            assert_eq!(
                includes(&fonts, Some(&cache), i64::MAX),
                Some(expected()),
                "{text}"
            );
        }
        // A whole file others may write is not read.
        std::fs::write(&cache, format!("{MAGIC} {k}\n/usr/share/a.conf\nend 1\n")).unwrap();
        std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        assert_eq!(
            read(&cache, &k),
            Some(vec![PathBuf::from("/usr/share/a.conf")])
        );
        std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o622))
            .unwrap();
        assert_eq!(read(&cache, &k), None);
    }
}

//! The compile-artifact cache: a size-bounded directory of compiled binaries, keyed by a hash
//! of everything that determines the compiler's output (source files, toolchain identity,
//! flags), so that a second run of the same Go or Rust code skips the compile.
//!
//! # Safety under concurrent runs
//!
//! Several `cordon` processes may use one cache directory at once, with no lock and no daemon:
//!
//! - [`Cache::put`] writes the entry to a fresh temp name in the cache directory (`O_EXCL`,
//!   mode 0600), `fsync`s it, and `rename(2)`s it over the entry's name. A reader therefore sees
//!   either no entry, an older complete entry, or the new complete entry; never a partial one.
//!   Two writers of the same key both succeed; the last rename wins.
//! - [`Cache::get`] verifies every entry (magic, version, key, length, SHA-256). An entry that
//!   fails (torn by a crash on a filesystem that reorders writes, truncated, tampered with) is a
//!   miss, and is removed if the name still points at the file that failed.
//! - After a put, least-recently-used entries (by mtime; `get` touches it) are removed until the
//!   total is within the bound. Entries that another process removed first are skipped.
//!
//! The directory must be owned by the current euid and not writable by group or others
//! ([`Cache::open`] checks): an entry planted there would be run as the user's compiled program.
//! So must every directory above it, and no symlink on the way may be another user's; the cache
//! then keeps the directory's real path, so a later open cannot be led elsewhere.
//! The checksum catches accidents, not an attacker who can write the directory.
//!
//! # Entry format (version 2)
//!
//! One file per key, named by the key (64 lowercase hex digits). All integers little-endian.
//!
//! | offset | size | field                                                            |
//! |--------|------|------------------------------------------------------------------|
//! | 0      | 8    | magic `b"CRDNART\0"`                                             |
//! | 8      | 4    | format version, `2`                                              |
//! | 12     | 4    | file mode of the artifact (permission bits only, `& 0o7777`)     |
//! | 16     | 8    | artifact length in bytes                                         |
//! | 24     | 4    | length of the compiler's stdout (UTF-8)                          |
//! | 28     | 4    | length of the compiler's stderr (UTF-8)                          |
//! | 32     | 64   | the key, as ASCII hex (guards against an entry under a wrong name) |
//! | 96     | 32   | SHA-256 over bytes `0..96` followed by the payload               |
//! | 128    | ...  | the payload: the artifact's bytes, then the compiler's stdout and stderr |
//!
//! The compiler's messages of the compile that made the artifact (warnings) are kept with it,
//! so that a cached run reports them as the first run did.
//! The checksum covers the header fields as well as the bytes, so a flipped mode or length is
//! caught too. Temp files are named `.tmp-<pid>-<counter>-<nanos>`; ones older than an hour
//! (left by a crashed writer) are removed during eviction.

use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use thiserror::Error;

/// Entry magic, the first 8 bytes of every entry file.
const MAGIC: &[u8; 8] = b"CRDNART\0";
/// Entry format version; bump when the layout changes (old entries then read as misses).
const VERSION: u32 = 2;
/// Length of a key in hex digits (SHA-256 = 32 bytes).
const KEY_HEX_LEN: usize = 64;
/// Header layout offsets, see the module doc.
const OFF_VERSION: usize = 8;
const OFF_MODE: usize = 12;
const OFF_LEN: usize = 16;
const OFF_OUT_LEN: usize = 24;
const OFF_ERR_LEN: usize = 28;
const OFF_KEY: usize = 32;
const OFF_SUM: usize = OFF_KEY + KEY_HEX_LEN;
/// Header length: everything before the payload.
pub const HEADER_LEN: usize = OFF_SUM + 32;
/// Prefix of in-progress entry files; never a valid key (keys are hex only).
const TEMP_PREFIX: &str = ".tmp-";
/// A temp file older than this was left by a writer that died; eviction removes it.
const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// Errors of the compile cache. A failed cache is never fatal to a run: callers compile anyway.
#[derive(Debug, Error)]
pub enum CacheError {
    #[error(
        "cannot create the compile cache directory {path}: {source}; make its parent \
         writable, or point XDG_CACHE_HOME at a writable directory"
    )]
    CreateDir { path: PathBuf, source: io::Error },

    #[error("cannot inspect the compile cache directory {path}: {source}")]
    StatDir { path: PathBuf, source: io::Error },

    #[error(
        "the compile cache path {path} is not a directory; remove it or point \
         XDG_CACHE_HOME elsewhere"
    )]
    NotADirectory { path: PathBuf },

    #[error(
        "refusing the compile cache directory {path}: it is owned by uid {owner} with mode \
         {mode:o}, but must be owned by uid {euid} and not writable by group or others, or \
         anyone who can write it could plant a binary that cordon would run as yours; fix it \
         with `chown {euid} {path}` and `chmod 700 {path}`, or remove it"
    )]
    InsecureDir {
        path: PathBuf,
        owner: u32,
        mode: u32,
        euid: u32,
    },

    #[error("compile cache {path}: {reason}")]
    InsecureAncestor { path: PathBuf, reason: String },

    #[error(
        "artifact of {size} bytes (with its {HEADER_LEN}-byte header) exceeds the compile \
         cache bound of {max} bytes; it was not cached. Raise the cache size to cache it"
    )]
    TooLarge { size: u64, max: u64 },

    #[error("invalid artifact mode {mode:o}: only permission bits (0o7777) may be set")]
    InvalidMode { mode: u32 },

    #[error(
        "cannot create a temp file {path} in the compile cache: {source}; check free space \
         and that the cache directory is writable"
    )]
    CreateTemp { path: PathBuf, source: io::Error },

    #[error("cannot write the compile cache entry {path}: {source}; check free space")]
    Write { path: PathBuf, source: io::Error },

    #[error("cannot move the compile cache entry {from} into place as {to}: {source}")]
    Rename {
        from: PathBuf,
        to: PathBuf,
        source: io::Error,
    },

    #[error(
        "the entry was stored, but listing {path} to evict old entries failed: {source}; the \
         cache may exceed its size bound until the next successful put"
    )]
    Evict { path: PathBuf, source: io::Error },
}

/// A cache key: hex SHA-256 over length-prefixed parts. Build it from everything that
/// determines the artifact (each source file's name and bytes, the toolchain's identity, flags).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(String);

impl Key {
    /// Hashes `parts`, each prefixed by its length as a little-endian u64, so part boundaries
    /// matter: `["ab", "c"]` and `["a", "bc"]` give different keys.
    pub fn new(parts: &[&[u8]]) -> Key {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        Key(hex(&hasher.finalize()))
    }

    /// The key as 64 lowercase hex digits (also the entry's file name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A cached artifact: the compiled program's bytes and its file mode (permission bits), with
/// what the compiler printed when it made them (its warnings), to be reported again on a hit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Artifact {
    pub bytes: Vec<u8>,
    pub mode: u32,
    /// The compiler's stdout.
    pub output: String,
    /// The compiler's stderr.
    pub error: String,
}

impl Artifact {
    /// The payload's length: the artifact, then the compiler's messages.
    fn payload_len(&self) -> usize {
        self.bytes.len() + self.output.len() + self.error.len()
    }
}

/// A compile-artifact cache directory with a size bound. See the module doc.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    max_bytes: u64,
}

/// Why a cache directory is not safe from other users, if it is not: every directory above it
/// (its real path) must be owned by `euid` or root and, when others may write it, be sticky.
/// Whoever can rename an entry of an ancestor can swap in a cache of their own (entry names are
/// predictable), whose contents would then run as the caller's code. A `/tmp/cordon-UID` made
/// by someone else, for a caller without a home, is the case this catches.
///
/// A symlink on the way to `dir` owned by another user is refused as well: its owner chooses
/// where `dir` leads and can point it elsewhere between any two opens. (Callers go on with the
/// real path, so that what was checked is what gets used.)
pub fn unsafe_ancestor(dir: &std::path::Path, euid: u32) -> Option<String> {
    if let Some(why) = foreign_symlink_reason(dir, euid) {
        return Some(why);
    }
    let real = match fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) => return Some(format!("cannot resolve {}: {e}", dir.display())),
    };
    // Read only when an owner is neither the caller nor root, once.
    let mut unmapped = None;
    let mut cur = real.parent();
    while let Some(a) = cur {
        let meta = match fs::symlink_metadata(a) {
            Ok(m) => m,
            Err(e) => return Some(format!("cannot stat {}: {e}", a.display())),
        };
        let others_may_rename = meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0;
        let owner = meta.uid();
        let trusted = owner == euid
            || owner == 0
            || owner_trusted(owner, euid, a, *unmapped.get_or_insert_with(unmapped_owner));
        if !trusted || others_may_rename {
            let unmapped_note = if unmapped.flatten() == Some(owner) {
                // (Read above: the owner was neither the caller nor root.)
                " (in this user namespace that uid stands for an owner it does not map: the host's root or any other user)"
            } else {
                ""
            };
            return Some(format!(
                "{} (owner uid {owner}{unmapped_note}, mode {:o}) lets another user replace what cordon keeps below it; it must be owned by uid {euid} or root and not writable by others unless sticky: fix it, or point XDG_CACHE_HOME / XDG_STATE_HOME at a private directory",
                a.display(),
                meta.mode() & 0o7777
            ));
        }
        cur = a.parent();
    }
    None
}

/// The directories whose owner, where a nested user namespace shows it as unmapped, is taken
/// to be the host's root: the root of the tree and the standard parents of homes and
/// temporary files (`/var/home` for hosts that link `/home` there). Any other directory
/// could be another user's (a top-level `/scratch`, a container's bind of someone's directory).
const UNMAPPED_TRUSTED: [&str; 6] = ["/", "/home", "/tmp", "/var", "/var/home", "/var/tmp"];

/// Whether the owner of the ancestor `dir` can be trusted not to replace what is below it:
/// the caller or root. `unmapped`: in a nested user namespace, the uid that owners unmapped in
/// it show as (the host's root, but also any other user of the host). That owner is trusted
/// only for [`UNMAPPED_TRUSTED`], so that root of `unshare --map-root-user` can keep a cache
/// in its home; anywhere else it is refused.
fn owner_trusted(owner: u32, euid: u32, dir: &Path, unmapped: Option<u32>) -> bool {
    owner == euid
        || owner == 0
        || (unmapped == Some(owner) && UNMAPPED_TRUSTED.iter().any(|t| dir == Path::new(t)))
}

/// In a nested user namespace, the uid that unmapped owners show as (`kernel.overflowuid`);
/// `None` in the host's.
fn unmapped_owner() -> Option<u32> {
    let map = fs::read_to_string("/proc/self/uid_map").ok()?;
    let initial = map.split_whitespace().eq(["0", "0", "4294967295"]);
    if initial {
        return None;
    }
    fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|u| u.trim().parse().ok())
        .or(Some(65534))
}

/// Why `dir` cannot be used if a symlink on the way to it (as far as it exists) is another
/// user's: checked before a missing part is made, which would follow it.
pub fn foreign_symlink_reason(dir: &Path, euid: u32) -> Option<String> {
    foreign_symlink(dir, euid).map(|(link, owner)| {
        format!(
            "{} is a symlink of uid {owner}: another user chooses where cordon keeps your files and can redirect them at any time; remove it (ask its owner or root), or point HOME, XDG_CACHE_HOME / XDG_STATE_HOME at a private directory",
            link.display()
        )
    })
}

/// The first symlink on the way to `dir` (each prefix of its absolute path, not followed)
/// that belongs to neither `euid` nor root, with its owner (an unmapped owner is taken as
/// [`owner_trusted`] says: at the top only).
fn foreign_symlink(dir: &Path, euid: u32) -> Option<(PathBuf, u32)> {
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(dir)
    };
    let mut prefix = PathBuf::new();
    let mut unmapped = None;
    for part in abs.components() {
        prefix.push(part);
        if let Ok(meta) = fs::symlink_metadata(&prefix)
            && meta.file_type().is_symlink()
            && meta.uid() != euid
            && meta.uid() != 0
            && !owner_trusted(
                meta.uid(),
                euid,
                &prefix,
                *unmapped.get_or_insert_with(unmapped_owner),
            )
        {
            return Some((prefix, meta.uid()));
        }
    }
    None
}

/// Why [`private_dir`] refused a directory.
#[derive(Debug)]
pub enum PrivateDirError {
    /// It could not be made.
    Create(io::Error),
    /// Its real path could not be resolved or inspected.
    Resolve(io::Error),
    /// It is not a directory.
    NotADirectory,
    /// It is another uid's, or group or others may write it.
    NotPrivate { owner: u32, mode: u32, euid: u32 },
    /// A symlink or a directory on the way to it lets another user redirect it (the reason).
    Unsafe(String),
}

impl std::fmt::Display for PrivateDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrivateDirError::Create(e) => write!(f, "cannot create it: {e}"),
            PrivateDirError::Resolve(e) => write!(f, "cannot inspect it: {e}"),
            PrivateDirError::NotADirectory => f.write_str("it is not a directory; remove it"),
            PrivateDirError::NotPrivate { owner, mode, euid } => write!(
                f,
                "it is owned by uid {owner} with mode {mode:o}, where cordon needs a directory of uid {euid} that only it may write (anyone who can write it could plant what cordon then uses as yours): remove it, or `chown {euid}` and `chmod 700` it"
            ),
            PrivateDirError::Unsafe(reason) => f.write_str(reason),
        }
    }
}

/// Makes `dir` (mode 0700, missing parents too) if needed and returns its real path, once it
/// is certain that only the caller (and root) can change what it holds: no other user's
/// symlink on the way (checked before anything is made, which would follow it), the
/// directory itself the caller's and not writable by group or others, and nothing above it
/// that another user may rename entries of ([`unsafe_ancestor`], for the path as given and
/// again for the real one, which may have changed in between). Callers use the real path
/// from then on, so that what was checked is what gets used. The compile cache, the package
/// cache and the history all live in such a directory.
pub fn private_dir(dir: &Path) -> Result<PathBuf, PrivateDirError> {
    let euid = nix::unistd::geteuid().as_raw();
    if let Some(reason) = foreign_symlink_reason(dir, euid) {
        return Err(PrivateDirError::Unsafe(reason));
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(PrivateDirError::Create)?;
    if let Some(reason) = unsafe_ancestor(dir, euid) {
        return Err(PrivateDirError::Unsafe(reason));
    }
    let real = fs::canonicalize(dir).map_err(PrivateDirError::Resolve)?;
    if let Some(reason) = unsafe_ancestor(&real, euid) {
        return Err(PrivateDirError::Unsafe(reason));
    }
    let meta = fs::symlink_metadata(&real).map_err(PrivateDirError::Resolve)?;
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory);
    }
    if meta.uid() != euid || meta.mode() & 0o022 != 0 {
        return Err(PrivateDirError::NotPrivate {
            owner: meta.uid(),
            mode: meta.mode() & 0o7777,
            euid,
        });
    }
    Ok(real)
}

impl Cache {
    /// Opens (creating with mode 0700 if missing) the cache directory `dir`, whose entries
    /// together are kept within `max_bytes` (entry files, headers included).
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64) -> Result<Cache, CacheError> {
        let path = dir.into();
        let dir = private_dir(&path).map_err(|e| match e {
            PrivateDirError::Create(source) => CacheError::CreateDir { path, source },
            PrivateDirError::Resolve(source) => CacheError::StatDir { path, source },
            PrivateDirError::NotADirectory => CacheError::NotADirectory { path },
            PrivateDirError::NotPrivate { owner, mode, euid } => CacheError::InsecureDir {
                path,
                owner,
                mode,
                euid,
            },
            PrivateDirError::Unsafe(reason) => CacheError::InsecureAncestor { path, reason },
        })?;
        Ok(Cache { dir, max_bytes })
    }

    /// The default cache directory for this process: `$XDG_CACHE_HOME/cordon/compile`
    /// (`~/.cache/cordon/compile` when unset), or `/var/cache/cordon/compile` for root
    /// whose /var is its own (see [`system_dirs`]).
    pub fn default_dir() -> PathBuf {
        let euid = nix::unistd::geteuid().as_raw();
        let xdg = std::env::var_os("XDG_CACHE_HOME");
        default_dir_for(
            system_dirs(),
            euid,
            xdg.as_deref(),
            home_dir(euid).as_deref(),
        )
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The size bound in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    fn entry_path(&self, key: &Key) -> PathBuf {
        self.dir.join(key.as_str())
    }

    /// Looks `key` up. A missing, unreadable or invalid entry is a miss (`None`); an invalid
    /// one is also removed. A hit touches the entry's mtime, which eviction uses as its LRU
    /// clock.
    pub fn get(&self, key: &Key) -> Option<Artifact> {
        let path = self.entry_path(key);
        let mut file = File::open(&path).ok()?;
        match read_entry(&mut file, key) {
            Ok(artifact) => {
                // Best effort: a failed touch only makes this entry look older to eviction.
                let _ = file.set_modified(SystemTime::now());
                Some(artifact)
            }
            Err(Invalid) => {
                remove_if_same_file(&path, &file);
                None
            }
        }
    }

    /// Stores `artifact` under `key` atomically (temp file, fsync, rename), then evicts
    /// least-recently-used entries until the cache is within its bound.
    pub fn put(&self, key: &Key, artifact: &Artifact) -> Result<(), CacheError> {
        if artifact.mode & !0o7777 != 0 {
            return Err(CacheError::InvalidMode {
                mode: artifact.mode,
            });
        }
        if u32::try_from(artifact.output.len()).is_err()
            || u32::try_from(artifact.error.len()).is_err()
        {
            return Err(CacheError::TooLarge {
                size: artifact.payload_len() as u64,
                max: u32::MAX as u64,
            });
        }
        let size = (HEADER_LEN + artifact.payload_len()) as u64;
        if size > self.max_bytes {
            return Err(CacheError::TooLarge {
                size,
                max: self.max_bytes,
            });
        }
        let header = encode_header(key, artifact);

        let (temp_path, mut temp) = self.create_temp()?;
        let written = temp
            .write_all(&header)
            .and_then(|()| temp.write_all(&artifact.bytes))
            .and_then(|()| temp.write_all(artifact.output.as_bytes()))
            .and_then(|()| temp.write_all(artifact.error.as_bytes()))
            .and_then(|()| temp.sync_all());
        drop(temp);
        if let Err(source) = written {
            let _ = fs::remove_file(&temp_path);
            return Err(CacheError::Write {
                path: temp_path,
                source,
            });
        }
        let path = self.entry_path(key);
        if let Err(source) = fs::rename(&temp_path, &path) {
            let _ = fs::remove_file(&temp_path);
            return Err(CacheError::Rename {
                from: temp_path,
                to: path,
                source,
            });
        }
        // Make the rename itself durable; if this fails the entry is merely lost on a crash.
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        self.evict()
    }

    /// Creates a fresh temp file (O_EXCL, 0600) in the cache directory.
    fn create_temp(&self) -> Result<(PathBuf, File), CacheError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut attempt = 0;
        loop {
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let name = format!(
                "{TEMP_PREFIX}{}-{}-{nanos}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            let path = self.dir.join(name);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => return Ok((path, file)),
                // A stale temp file of a dead process with our pid: take the next name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1;
                }
                Err(source) => return Err(CacheError::CreateTemp { path, source }),
            }
        }
    }

    /// Removes least-recently-used entries until the total size is within `max_bytes`, and
    /// temp files abandoned by dead writers. Tolerates entries vanishing concurrently.
    fn evict(&self) -> Result<(), CacheError> {
        let listing = fs::read_dir(&self.dir).map_err(|source| CacheError::Evict {
            path: self.dir.clone(),
            source,
        })?;
        let now = SystemTime::now();
        let mut entries = Vec::new();
        let mut total: u64 = 0;
        for dirent in listing {
            let Ok(dirent) = dirent else { continue };
            let name = dirent.file_name();
            // Vanished since the listing, or unreadable: not ours to count.
            let Ok(meta) = dirent.metadata() else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if is_key_name(&name) {
                total += meta.len();
                entries.push((mtime, name, meta.len()));
            } else if name.to_string_lossy().starts_with(TEMP_PREFIX)
                && now.duration_since(mtime).unwrap_or_default() > STALE_TEMP_AGE
            {
                let _ = fs::remove_file(dirent.path());
            }
        }
        if total <= self.max_bytes {
            return Ok(());
        }
        entries.sort();
        for (_, name, len) in entries {
            if total <= self.max_bytes {
                break;
            }
            match fs::remove_file(self.dir.join(&name)) {
                Ok(()) => total -= len,
                // Another process evicted it first: it no longer counts either way.
                Err(e) if e.kind() == io::ErrorKind::NotFound => total -= len,
                Err(_) => {}
            }
        }
        Ok(())
    }
}

/// Whether this process keeps its state in the system directories (/var/cache/cordon,
/// /var/lib/cordon) rather than the caller's XDG ones: root does, where /var is its own.
/// Root of a nested user namespace has euid 0 but owns /var only in a file system of its
/// own (a rootless container's, which keeps a root filesystem built into the image found);
/// on the host's (`unshare --map-root-user`), /var shows as owned by an id the namespace
/// does not map, which root there cannot write: it is treated as the user it is.
pub fn system_dirs() -> bool {
    nix::unistd::geteuid().is_root()
        && (crate::launch::host_ids().is_ok_and(|ids| ids.host_root())
            || fs::metadata("/var").is_ok_and(|m| m.uid() == 0))
}

/// The default cache directory, from explicit inputs (see [`Cache::default_dir`]).
/// A relative or empty `XDG_CACHE_HOME` is ignored, as the XDG spec requires.
pub fn default_dir_for(
    system: bool,
    euid: u32,
    xdg_cache_home: Option<&OsStr>,
    home: Option<&Path>,
) -> PathBuf {
    if system {
        return PathBuf::from("/var/cache/cordon/compile");
    }
    let base = match xdg_cache_home.map(Path::new) {
        Some(xdg) if xdg.is_absolute() => xdg.to_path_buf(),
        _ => match home {
            Some(home) => home.join(".cache"),
            // No home at all: a per-user directory under the temp dir; Cache::open refuses it
            // unless it is ours and private.
            None => std::env::temp_dir().join(format!("cordon-{euid}")),
        },
    };
    base.join("cordon").join("compile")
}

/// `$HOME`, else the home directory of `uid` in the user database.
pub(crate) fn home_dir(uid: u32) -> Option<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Some(PathBuf::from(home)),
        _ => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|user| user.dir),
    }
}

/// Replaces `path` with a file holding `bytes` (permission bits `mode`), whole or not at all:
/// written to a new file beside it (`.tmp-<pid>-<thread>-<nanos>-<name>`, never through a
/// symlink) and renamed over it. Not synced: for the small caches of computed answers, whose
/// readers check what they read and compute it again otherwise.
pub(crate) fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // Unique to this writer: a batch may run several sandboxes in threads at once.
    let temp = path.with_file_name(format!(
        "{TEMP_PREFIX}{}-{:?}-{nanos}-{name}",
        std::process::id(),
        std::thread::current().id()
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn is_key_name(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.len() == KEY_HEX_LEN && name.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn encode_header(key: &Key, artifact: &Artifact) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&artifact.mode.to_le_bytes());
    header.extend_from_slice(&(artifact.bytes.len() as u64).to_le_bytes());
    header.extend_from_slice(&(artifact.output.len() as u32).to_le_bytes());
    header.extend_from_slice(&(artifact.error.len() as u32).to_le_bytes());
    header.extend_from_slice(key.as_str().as_bytes());
    let sum = checksum(
        &header,
        &[
            &artifact.bytes,
            artifact.output.as_bytes(),
            artifact.error.as_bytes(),
        ],
    );
    header.extend_from_slice(&sum);
    debug_assert_eq!(header.len(), HEADER_LEN);
    header
}

fn checksum(header_fields: &[u8], payload: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(header_fields);
    for part in payload {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// An entry that failed verification (or could not be read): a miss.
struct Invalid;

impl From<io::Error> for Invalid {
    fn from(_: io::Error) -> Invalid {
        Invalid
    }
}

/// Reads and verifies one entry. The length is checked against the file size before the
/// payload is allocated, so a corrupt header cannot ask for a huge buffer.
fn read_entry(file: &mut File, key: &Key) -> Result<Artifact, Invalid> {
    let file_len = file.metadata()?.len();
    let mut header = [0u8; HEADER_LEN];
    file.read_exact(&mut header)?;
    let u32_at = |off: usize| u32::from_le_bytes(header[off..off + 4].try_into().unwrap());
    let len = u64::from_le_bytes(header[OFF_LEN..OFF_LEN + 8].try_into().unwrap());
    let (out_len, err_len) = (u32_at(OFF_OUT_LEN) as u64, u32_at(OFF_ERR_LEN) as u64);
    let mode = u32_at(OFF_MODE);
    if &header[..OFF_VERSION] != MAGIC
        || u32_at(OFF_VERSION) != VERSION
        || mode & !0o7777 != 0
        || &header[OFF_KEY..OFF_SUM] != key.as_str().as_bytes()
        || !matches!(
            (file_len.checked_sub(HEADER_LEN as u64), len.checked_add(out_len + err_len)),
            (Some(have), Some(want)) if have == want
        )
    {
        return Err(Invalid);
    }
    let mut read = |n: u64| -> Result<Vec<u8>, Invalid> {
        let mut bytes = vec![0u8; n as usize];
        file.read_exact(&mut bytes)?;
        Ok(bytes)
    };
    let (bytes, output, error) = (read(len)?, read(out_len)?, read(err_len)?);
    if checksum(&header[..OFF_SUM], &[&bytes, &output, &error]) != header[OFF_SUM..] {
        return Err(Invalid);
    }
    Ok(Artifact {
        bytes,
        mode,
        output: String::from_utf8(output).map_err(|_| Invalid)?,
        error: String::from_utf8(error).map_err(|_| Invalid)?,
    })
}

/// Removes `path` only if it still names the file we opened: a writer may have renamed a good
/// entry over it since. (A rename between the check and the unlink can still lose that good
/// entry; that costs one recompile, never a wrong artifact.)
fn remove_if_same_file(path: &Path, file: &File) {
    let (Ok(opened), Ok(named)) = (file.metadata(), fs::symlink_metadata(path)) else {
        return;
    };
    if opened.dev() == named.dev() && opened.ino() == named.ino() {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn artifact(seed: u8, len: usize) -> Artifact {
        Artifact {
            bytes: (0..len)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
                .collect(),
            mode: 0o755,
            ..Artifact::default()
        }
    }

    #[test]
    fn an_unmapped_owner_is_trusted_only_at_the_top() {
        let p = Path::new;
        // The caller and root, anywhere.
        assert!(owner_trusted(1000, 1000, p("/home/me/x"), None));
        assert!(owner_trusted(0, 1000, p("/home/me"), None));
        // Another user: never.
        assert!(!owner_trusted(1001, 1000, p("/home"), None));
        // In the host's namespace, nobody's directory is another user's.
        assert!(!owner_trusted(65534, 0, p("/home"), None));
        // In a nested namespace: the unmapped owner of /, /home, /var is the host's root...
        for top in ["/", "/home", "/var", "/tmp", "/var/home", "/var/tmp"] {
            assert!(owner_trusted(65534, 0, p(top), Some(65534)), "{top}");
        }
        // ...but below them, or at another top-level directory (a container's bind of some
        // user's directory at /data, a host's /scratch), it could be any user of the host.
        for other in ["/home/other", "/var/cache", "/data", "/scratch", "/opt"] {
            assert!(!owner_trusted(65534, 0, p(other), Some(65534)), "{other}");
        }
        // Only the overflow uid counts as unmapped.
        assert!(!owner_trusted(1001, 0, p("/home"), Some(65534)));
    }

    fn entry_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn set_age(cache: &Cache, key: &Key, secs_ago: u64) {
        let file = File::options()
            .write(true)
            .open(cache.entry_path(key))
            .unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
            .unwrap();
    }

    #[test]
    fn round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path().join("c"), 1 << 20).unwrap();
        let key = Key::new(&[b"fn main() {}", b"rustc 1.95.0", b"-O"]);
        let art = artifact(7, 5000);
        cache.put(&key, &art).unwrap();
        assert_eq!(cache.get(&key), Some(art));
        // Created 0700; the entry is 0600 and named by the key; no temp file left.
        let mode = fs::metadata(cache.dir()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(entry_files(cache.dir()), vec![key.to_string()]);
        let entry_mode = fs::metadata(cache.entry_path(&key)).unwrap().mode() & 0o777;
        assert_eq!(entry_mode, 0o600);
    }

    #[test]
    fn the_compilers_messages_come_back_with_the_artifact() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        let key = Key::new(&[b"warned"]);
        let art = Artifact {
            output: "stdout ✓\n".into(),
            error: "warning: unused variable: `x`\n".into(),
            ..artifact(5, 300)
        };
        cache.put(&key, &art).unwrap();
        assert_eq!(cache.get(&key), Some(art.clone()));
        let len = fs::metadata(cache.entry_path(&key)).unwrap().len();
        assert_eq!(
            len as usize,
            HEADER_LEN + 300 + art.output.len() + art.error.len()
        );
        // A flipped byte in the messages fails the checksum as one in the artifact does.
        let mut bytes = fs::read(cache.entry_path(&key)).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        fs::write(cache.entry_path(&key), &bytes).unwrap();
        assert_eq!(cache.get(&key), None);
        assert!(!cache.entry_path(&key).exists());
        // An entry of the previous format (version 1) is a miss, not misread.
        cache.put(&key, &art).unwrap();
        let mut bytes = fs::read(cache.entry_path(&key)).unwrap();
        bytes[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&1u32.to_le_bytes());
        fs::write(cache.entry_path(&key), &bytes).unwrap();
        assert_eq!(cache.get(&key), None);
    }

    #[test]
    fn overwrite_and_empty_artifact() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        let key = Key::new(&[b"x"]);
        cache.put(&key, &artifact(1, 10)).unwrap();
        let empty = Artifact {
            bytes: vec![],
            mode: 0o500,
            ..Artifact::default()
        };
        cache.put(&key, &empty).unwrap();
        assert_eq!(cache.get(&key), Some(empty));
    }

    #[test]
    fn miss() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        assert_eq!(cache.get(&Key::new(&[b"never stored"])), None);
    }

    #[test]
    fn truncated_entry_is_a_miss_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        let key = Key::new(&[b"truncated"]);
        cache.put(&key, &artifact(3, 4096)).unwrap();
        let path = cache.entry_path(&key);
        for cut in [HEADER_LEN as u64 + 4095, HEADER_LEN as u64, 10, 0] {
            cache.put(&key, &artifact(3, 4096)).unwrap();
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(cut)
                .unwrap();
            assert_eq!(cache.get(&key), None, "cut at {cut}");
            assert!(!path.exists(), "cut at {cut}: entry not removed");
        }
    }

    #[test]
    fn flipped_byte_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        let key = Key::new(&[b"flip"]);
        let path = cache.entry_path(&key);
        // A payload byte, a mode byte, a key byte, a checksum byte, the magic.
        for offset in [HEADER_LEN + 100, OFF_MODE, OFF_KEY + 5, OFF_SUM + 1, 0] {
            cache.put(&key, &artifact(9, 1000)).unwrap();
            let mut data = fs::read(&path).unwrap();
            data[offset] ^= 0x01;
            fs::write(&path, &data).unwrap();
            assert_eq!(cache.get(&key), None, "flip at {offset}");
            assert!(!path.exists(), "flip at {offset}: entry not removed");
        }
    }

    #[test]
    fn entry_under_the_wrong_name_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        let (a, b) = (Key::new(&[b"a"]), Key::new(&[b"b"]));
        cache.put(&a, &artifact(1, 100)).unwrap();
        fs::copy(cache.entry_path(&a), cache.entry_path(&b)).unwrap();
        assert_eq!(cache.get(&b), None);
        assert!(cache.get(&a).is_some());
    }

    #[test]
    fn lru_eviction_keeps_the_bound_and_evicts_the_oldest() {
        let tmp = tempfile::tempdir().unwrap();
        let entry = (HEADER_LEN + 1000) as u64;
        let cache = Cache::open(tmp.path(), 3 * entry + 10).unwrap();
        let keys: Vec<Key> = (0..5u8).map(|i| Key::new(&[&[i]])).collect();
        for (i, key) in keys.iter().take(3).enumerate() {
            cache.put(key, &artifact(i as u8, 1000)).unwrap();
            // mtime granularity is coarse: give each entry a distinct, known age.
            set_age(&cache, key, 1000 - i as u64 * 100);
        }
        // keys[0] is the oldest by insertion, but a hit makes it the newest.
        assert!(cache.get(&keys[0]).is_some());
        cache.put(&keys[3], &artifact(3, 1000)).unwrap();
        let mut expected: Vec<String> = [&keys[0], &keys[2], &keys[3]]
            .iter()
            .map(|k| k.to_string())
            .collect();
        expected.sort();
        assert_eq!(entry_files(cache.dir()), expected);
        assert!(cache.get(&keys[1]).is_none());

        // A bigger entry evicts as many old ones as it needs.
        set_age(&cache, &keys[2], 500);
        set_age(&cache, &keys[3], 400);
        cache.put(&keys[4], &artifact(4, 2000)).unwrap();
        let total: u64 = entry_files(cache.dir())
            .iter()
            .map(|n| fs::metadata(cache.dir().join(n)).unwrap().len())
            .sum();
        assert!(total <= cache.max_bytes(), "total {total}");
        assert!(cache.get(&keys[4]).is_some());
        assert!(
            cache.get(&keys[0]).is_some(),
            "the most recent hit was evicted"
        );
        assert!(cache.get(&keys[2]).is_none());
    }

    #[test]
    fn too_large_and_bad_mode_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 500).unwrap();
        let key = Key::new(&[b"big"]);
        let err = cache.put(&key, &artifact(0, 1000)).unwrap_err();
        assert!(matches!(err, CacheError::TooLarge { .. }), "{err}");
        let bad = Artifact {
            bytes: vec![1],
            mode: 0o100755,
            ..Artifact::default()
        };
        assert!(matches!(
            cache.put(&key, &bad),
            Err(CacheError::InvalidMode { .. })
        ));
        assert!(entry_files(cache.dir()).is_empty());
    }

    #[test]
    fn stale_temp_files_are_removed_fresh_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(tmp.path(), 1 << 20).unwrap();
        let stale = tmp.path().join(".tmp-1-2-3");
        let fresh = tmp.path().join(".tmp-4-5-6");
        let other = tmp.path().join("README");
        for p in [&stale, &fresh, &other] {
            fs::write(p, b"x").unwrap();
        }
        File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(SystemTime::now() - 2 * STALE_TEMP_AGE)
            .unwrap();
        cache.put(&Key::new(&[b"k"]), &artifact(0, 10)).unwrap();
        assert!(!stale.exists());
        assert!(fresh.exists());
        assert!(other.exists());
    }

    #[test]
    fn insecure_directory_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let err = Cache::open(tmp.path(), 1 << 20).unwrap_err();
        assert!(matches!(err, CacheError::InsecureDir { .. }), "{err}");
        assert!(err.to_string().contains("chmod 700"), "{err}");
    }

    #[test]
    fn a_cache_below_a_directory_others_may_rename_in_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let open_parent = tmp.path().join("shared");
        fs::create_dir(&open_parent).unwrap();
        fs::set_permissions(&open_parent, fs::Permissions::from_mode(0o777)).unwrap();
        let err = Cache::open(open_parent.join("cache"), 1 << 20).unwrap_err();
        assert!(matches!(err, CacheError::InsecureAncestor { .. }), "{err}");
        assert!(err.to_string().contains("shared"), "{err}");
        // Sticky, as /tmp is: nobody but the owner can rename the cache away.
        fs::set_permissions(&open_parent, fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(Cache::open(open_parent.join("cache2"), 1 << 20).is_ok());
    }

    #[test]
    fn the_cache_is_used_by_its_real_path_and_never_through_anothers_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        // The caller's own symlink: followed once, and the cache keeps where it led.
        let cache = Cache::open(link.join("c"), 1 << 20).unwrap();
        assert_eq!(cache.dir(), fs::canonicalize(&real).unwrap().join("c"));
        // Another user's symlink on the way (as one planted at /tmp/cordon-UID): refused.
        let euid = nix::unistd::geteuid().as_raw();
        let other = nix::unistd::Uid::from_raw(euid + 4242);
        if nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &link,
            Some(other),
            None,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_err()
        {
            eprintln!("SKIP: another user's symlink: chown needs root");
            return;
        }
        let err = Cache::open(link.join("c"), 1 << 20).unwrap_err();
        assert!(matches!(err, CacheError::InsecureAncestor { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{} is a symlink of uid {}", link.display(), other))
                && msg.contains("XDG_CACHE_HOME"),
            "{msg}"
        );
        assert!(unsafe_ancestor(&link.join("c"), euid).is_some());
        // Refused before anything is made through it.
        assert!(Cache::open(link.join("new/c"), 1 << 20).is_err());
        assert!(
            !real.join("new").exists(),
            "a directory was made through the symlink"
        );
    }

    #[test]
    fn concurrent_puts_and_gets_never_see_a_wrong_or_partial_artifact() {
        let tmp = tempfile::tempdir().unwrap();
        const LEN: usize = 64 * 1024;
        // Room for about 6 entries: evictions run while others read and write.
        let cache = Arc::new(Cache::open(tmp.path(), 6 * (HEADER_LEN + LEN) as u64).unwrap());
        // Content is a function of the key, so any wrong or partial read is detectable.
        let expected = |k: u8| Artifact {
            bytes: (0..LEN)
                .map(|i| (i as u8) ^ k.wrapping_mul(37) ^ (i >> 8) as u8)
                .collect(),
            mode: 0o700 | u32::from(k % 8),
            error: format!("warning {k}"),
            ..Artifact::default()
        };
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                let cache = Arc::clone(&cache);
                std::thread::spawn(move || {
                    let mut hits = 0;
                    for round in 0..25u8 {
                        // Key 0 is shared by every thread; the others are per thread.
                        let k = if round % 2 == 0 { 0 } else { 1 + t };
                        let key = Key::new(&[b"concurrent", &[k]]);
                        let want = expected(k);
                        cache.put(&key, &want).unwrap();
                        for other in [0, 1 + (t + round) % 8] {
                            let key = Key::new(&[b"concurrent", &[other]]);
                            if let Some(got) = cache.get(&key) {
                                assert!(got == expected(other), "wrong artifact for key {other}");
                                hits += 1;
                            }
                        }
                    }
                    hits
                })
            })
            .collect();
        let hits: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(hits > 0);
        let names = entry_files(cache.dir());
        assert!(
            names.iter().all(|n| !n.starts_with(TEMP_PREFIX)),
            "{names:?}"
        );
        let total: u64 = names
            .iter()
            .map(|n| fs::metadata(cache.dir().join(n)).unwrap().len())
            .sum();
        assert!(total <= cache.max_bytes());
    }

    #[test]
    fn key_separates_parts() {
        assert_ne!(Key::new(&[b"ab", b"c"]), Key::new(&[b"a", b"bc"]));
        assert_ne!(Key::new(&[b"ab"]), Key::new(&[b"ab", b""]));
        assert_ne!(Key::new(&[]), Key::new(&[b""]));
        assert_eq!(Key::new(&[b"a", b"b"]), Key::new(&[b"a", b"b"]));
        let key = Key::new(&[b"a"]);
        assert!(is_key_name(OsStr::new(key.as_str())));
        // Pinned: entries written by one build must be found by the next.
        assert_eq!(
            Key::new(&[]).as_str(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn default_dir_follows_xdg_and_root() {
        let home = Path::new("/home/u");
        assert_eq!(
            default_dir_for(true, 0, Some(OsStr::new("/x")), Some(home)),
            PathBuf::from("/var/cache/cordon/compile")
        );
        assert_eq!(
            default_dir_for(false, 1000, Some(OsStr::new("/xdg/cache")), Some(home)),
            PathBuf::from("/xdg/cache/cordon/compile")
        );
        assert_eq!(
            default_dir_for(false, 1000, None, Some(home)),
            PathBuf::from("/home/u/.cache/cordon/compile")
        );
        // Relative and empty XDG values are ignored (XDG base directory spec).
        for bad in ["relative/dir", ""] {
            assert_eq!(
                default_dir_for(false, 1000, Some(OsStr::new(bad)), Some(home)),
                PathBuf::from("/home/u/.cache/cordon/compile")
            );
        }
    }
}

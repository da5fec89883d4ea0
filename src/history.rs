//! The run history: one JSON line per run, appended by every `cordon` process that runs code,
//! read back by `cordon history`.
//!
//! # Concurrency and bound
//!
//! There is no daemon, so the file itself is the meeting point. [`History::append`]:
//!
//! 1. opens the file `O_APPEND|O_CREAT` (mode 0600; missing parent directories are created 0700);
//! 2. takes an exclusive `flock(2)` on it;
//! 3. checks that the path still names the inode it locked (a concurrent rotation may have
//!    renamed a new file over it while this process waited); if not, it starts over;
//! 4. if the line fits within `max_bytes`, writes it with one `write(2)`; otherwise rotates:
//!    keeps the newest half of the lines (fewer if still needed to fit), adds the new line,
//!    writes that to a temp file, `fsync`s it and renames it over the history file, all while
//!    holding the lock on the old file.
//!
//! So lines never interleave, no append is lost to a rotation, and the file never exceeds
//! `max_bytes` (unless a single record is longer than that; then it holds only that record).
//! Readers take a shared lock, so they never see a half-written line.
//!
//! Records use the result object's field names (`executionId`, `executionTime`, ...; see
//! DESIGN.md), so a history line and a `--json` result agree.

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Default bound on the history file: 4 MiB, about 15,000 records.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 20;

/// How many times `append` starts over because a concurrent rotation replaced the file.
/// Each retry means another process completed a rotation, so this is never reached in practice.
const MAX_REOPENS: usize = 100;

/// Errors of the run history.
#[derive(Debug, Error)]
pub enum HistoryError {
    #[error(
        "cannot create the history directory {path}: {source}; make its parent writable, or \
         point XDG_STATE_HOME at a writable directory"
    )]
    CreateDir { path: PathBuf, source: io::Error },

    #[error(
        "cannot open the history file {path}: {source}; check its owner and permissions, or \
         point XDG_STATE_HOME elsewhere"
    )]
    Open { path: PathBuf, source: io::Error },

    #[error("the history directory {path} is not safe to write in: {reason}")]
    Insecure { path: PathBuf, reason: String },

    #[error(
        "cannot lock the history file {path} (flock): {errno}; the filesystem may not support \
         flock(2): keep the history on a local filesystem"
    )]
    Lock {
        path: PathBuf,
        errno: nix::errno::Errno,
    },

    #[error("cannot inspect the history file {path}: {source}")]
    Stat { path: PathBuf, source: io::Error },

    #[error(
        "the history file {path} kept being replaced while appending ({MAX_REOPENS} times); \
         is another program rewriting it?"
    )]
    KeptChanging { path: PathBuf },

    #[error("cannot encode a history record: {0}")]
    Encode(#[from] serde_json::Error),

    #[error("cannot write to the history file {path}: {source}; check free space")]
    Write { path: PathBuf, source: io::Error },

    #[error(
        "short write to the history file {path}: {written} of {expected} bytes; the disk \
         may be full (the partial line will be skipped when reading)"
    )]
    ShortWrite {
        path: PathBuf,
        written: usize,
        expected: usize,
    },

    #[error("cannot read the history file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },

    #[error(
        "cannot rotate the history file {path} through the temp file {temp}: {source}; check \
         free space and that the directory is writable"
    )]
    Rotate {
        path: PathBuf,
        temp: PathBuf,
        source: io::Error,
    },
}

/// One run, as stored in the history file (one JSON object per line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub execution_id: String,
    /// When the run ended: RFC 3339 UTC, millisecond precision: `2024-02-29T12:00:00.000Z`.
    pub timestamp: String,
    pub language: String,
    pub code_length: u64,
    pub success: bool,
    /// One of the result statuses (`ok`, `runtime_error`, `timeout`, ...).
    pub status: String,
    /// The program's exit code, when it exited (records of older cordons have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the program (`SIGKILL`...), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// For a compiled language: whether the artifact came from the compile cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cached: Option<bool>,
    /// Wall time in milliseconds (the compile's included).
    pub execution_time: f64,
    /// CPU time in milliseconds, when measured.
    pub cpu_time: Option<f64>,
    /// Peak memory in bytes, when measured.
    pub memory_used: Option<u64>,
}

impl Record {
    /// A new unique execution id, in hex: `<unix nanos>-<pid>-<counter>-<random>`. Time, pid
    /// and a process-wide counter make it unique on this host; the random part (from
    /// `/dev/urandom`) makes it unique across hosts and pid reuse.
    pub fn new_id() -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        format!(
            "{nanos:016x}-{:08x}-{count:04x}-{:016x}",
            std::process::id(),
            random_u64()
        )
    }
}

/// The current time as an RFC 3339 UTC timestamp, for [`Record::timestamp`].
pub fn now_rfc3339() -> String {
    rfc3339_utc(SystemTime::now())
}

/// 8 random bytes from `/dev/urandom`; if that cannot be read (a minimal chroot), std's
/// per-process random hash keys, which the OS seeded.
fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    match File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)) {
        Ok(()) => u64::from_ne_bytes(buf),
        Err(_) => {
            use std::hash::{BuildHasher, Hasher};
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(0);
            hasher.finish()
        }
    }
}

/// Formats `t` as RFC 3339 in UTC with milliseconds, e.g. `2009-02-13T23:31:30.000Z`.
/// Instants before 1970 are handled; years outside 0000..=9999 are not representable in
/// RFC 3339 and are clamped to that range.
pub fn rfc3339_utc(t: SystemTime) -> String {
    // Whole seconds (floored) and milliseconds since the epoch, also for instants before it.
    let (secs, millis) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_millis()),
        Err(e) => {
            let d = e.duration();
            let (mut s, mut ms) = (-(d.as_secs() as i64), d.subsec_nanos().div_ceil(1_000_000));
            if ms > 0 {
                s -= 1;
                ms = 1000 - ms;
            }
            (s, ms)
        }
    };
    // 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
    let secs = secs.clamp(-62_167_219_200, 253_402_300_799);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        tod / 3600,
        tod % 3600 / 60,
        tod % 60
    )
}

/// Proleptic Gregorian (year, month, day) of the day `z` days after 1970-01-01.
/// Howard Hinnant's `civil_from_days` (<https://howardhinnant.github.io/date_algorithms.html>).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The newest records and how many malformed lines were skipped to find them.
#[derive(Debug, Default, PartialEq)]
pub struct Tail {
    /// Oldest first.
    pub records: Vec<Record>,
    /// Lines that were not a valid record (torn by a crash, edited by hand, another format),
    /// among those read while collecting `records`.
    pub malformed: usize,
}

/// The history file and its size bound.
#[derive(Debug, Clone)]
pub struct History {
    path: PathBuf,
    max_bytes: u64,
}

impl History {
    /// A history at `path`, kept within `max_bytes` ([`DEFAULT_MAX_BYTES`] is a good value).
    /// Nothing is touched until the first append.
    pub fn new(path: impl Into<PathBuf>, max_bytes: u64) -> History {
        History {
            path: path.into(),
            max_bytes,
        }
    }

    /// The history at [`History::default_path`] with [`DEFAULT_MAX_BYTES`], its directory
    /// created (0700) so that an unusable location is reported before the first append.
    pub fn open_default() -> Result<History, HistoryError> {
        let path = History::default_path();
        let history = History::new(&path, DEFAULT_MAX_BYTES);
        // From here on by its directory's real path: no symlink on the way can redirect the
        // later opens after the check.
        let real = match (history.create_parent()?, path.file_name()) {
            (Some(dir), Some(name)) => dir.join(name),
            _ => path,
        };
        Ok(History::new(real, DEFAULT_MAX_BYTES))
    }

    /// `$XDG_STATE_HOME/cordon/history.jsonl` (`~/.local/state/cordon/history.jsonl` when
    /// unset), or `/var/lib/cordon/history.jsonl` for root whose /var is its own
    /// ([`crate::cache::system_dirs`]).
    pub fn default_path() -> PathBuf {
        let euid = nix::unistd::geteuid().as_raw();
        let xdg = std::env::var_os("XDG_STATE_HOME");
        default_path_for(
            crate::cache::system_dirs(),
            euid,
            xdg.as_deref(),
            crate::cache::home_dir(euid).as_deref(),
        )
    }

    /// The history file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line. Safe under concurrent appends from any number of
    /// processes; rotates the file when the line would push it past the bound (module doc).
    pub fn append(&self, record: &Record) -> Result<(), HistoryError> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.create_parent()?;
        for _ in 0..MAX_REOPENS {
            // Never through a symlink: the directory is checked to be the caller's, and the
            // file must be its own too.
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.path)
                .map_err(|source| self.open_error(source))?;
            let mut locked = self.lock(file, FlockArg::LockExclusive)?;
            if !self.still_names(&locked)? {
                continue; // rotated while we waited: append to the new file instead
            }
            let len = locked.metadata().map_err(|s| self.stat_error(s))?.len();
            // A previous writer died mid-line (or the disk filled): end that line first, so
            // this record stays parseable.
            if len > 0 && !ends_with_newline(&locked, len) {
                line.insert(0, b'\n');
            }
            if len + line.len() as u64 <= self.max_bytes {
                let written = locked.write(&line).map_err(|source| HistoryError::Write {
                    path: self.path.clone(),
                    source,
                })?;
                if written != line.len() {
                    return Err(HistoryError::ShortWrite {
                        path: self.path.clone(),
                        written,
                        expected: line.len(),
                    });
                }
                return Ok(());
            }
            // The lock is released when `locked` drops, after the rename.
            return self.rotate(&mut locked, &line);
        }
        Err(HistoryError::KeptChanging {
            path: self.path.clone(),
        })
    }

    /// Rewrites the locked file as its newest half of lines plus `line`, through a temp file
    /// renamed over the path.
    fn rotate(&self, locked: &mut Flock<File>, line: &[u8]) -> Result<(), HistoryError> {
        let mut old = Vec::new();
        locked
            .read_to_end(&mut old)
            .map_err(|source| HistoryError::Read {
                path: self.path.clone(),
                source,
            })?;
        let lines: Vec<&[u8]> = old
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let budget = self.max_bytes.saturating_sub(line.len() as u64);
        let mut keep = lines.len() / 2;
        let mut kept_bytes: u64 = lines[lines.len() - keep..]
            .iter()
            .map(|l| l.len() as u64 + 1)
            .sum();
        while keep > 0 && kept_bytes > budget {
            kept_bytes -= lines[lines.len() - keep].len() as u64 + 1;
            keep -= 1;
        }
        let mut new = Vec::with_capacity(kept_bytes as usize + line.len());
        for l in &lines[lines.len() - keep..] {
            new.extend_from_slice(l);
            new.push(b'\n');
        }
        // `line` may start with a newline meant to end a torn last line; not needed here.
        new.extend_from_slice(line.strip_prefix(b"\n").unwrap_or(line));

        let temp = self.temp_path();
        let rotate_error = |source| HistoryError::Rotate {
            path: self.path.clone(),
            temp: temp.clone(),
            source,
        };
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut f| f.write_all(&new).and_then(|()| f.sync_all()))
            .and_then(|()| fs::rename(&temp, &self.path));
        if let Err(source) = written {
            let _ = fs::remove_file(&temp);
            return Err(rotate_error(source));
        }
        if let Some(dir) = self.path.parent().and_then(|p| File::open(p).ok()) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// The newest `n` records, oldest first. Malformed lines are skipped; [`History::tail`]
    /// also says how many. A missing history file is an empty history.
    pub fn last(&self, n: usize) -> Result<Vec<Record>, HistoryError> {
        Ok(self.tail(n)?.records)
    }

    /// Like [`History::last`], and counts the malformed lines skipped on the way (reading from
    /// the end, so only lines newer than the oldest returned record are counted, or all lines
    /// when there are fewer than `n` records).
    pub fn tail(&self, n: usize) -> Result<Tail, HistoryError> {
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Tail::default()),
            Err(source) => return Err(self.open_error(source)),
        };
        // Shared lock: no half-written line. If a rotation replaced the file meanwhile, this
        // still reads a complete (slightly older) snapshot.
        let mut locked = self.lock(file, FlockArg::LockShared)?;
        let mut data = Vec::new();
        locked
            .read_to_end(&mut data)
            .map_err(|source| HistoryError::Read {
                path: self.path.clone(),
                source,
            })?;
        drop(locked);
        let mut tail = Tail::default();
        for line in data.rsplit(|&b| b == b'\n') {
            if tail.records.len() == n {
                break;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Record>(line) {
                Ok(record) => tail.records.push(record),
                Err(_) => tail.malformed += 1,
            }
        }
        tail.records.reverse();
        Ok(tail)
    }

    /// Creates the history file's missing parent directories, mode 0700, checks them, and
    /// returns the parent's real path (`None` for a bare file name).
    fn create_parent(&self) -> Result<Option<PathBuf>, HistoryError> {
        let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) else {
            return Ok(None);
        };
        // The directory must be the caller's, and no one else may replace it or what is
        // above it (the fallback under /tmp could be made by anyone first).
        crate::cache::private_dir(parent)
            .map(Some)
            .map_err(|e| match e {
                crate::cache::PrivateDirError::Create(source) => HistoryError::CreateDir {
                    path: parent.to_path_buf(),
                    source,
                },
                e => HistoryError::Insecure {
                    path: parent.to_path_buf(),
                    reason: format!("{e}; or point XDG_STATE_HOME at a private directory"),
                },
            })
    }

    /// `flock(2)`, retried when a signal interrupts the wait.
    fn lock(&self, mut file: File, how: FlockArg) -> Result<Flock<File>, HistoryError> {
        loop {
            match Flock::lock(file, how) {
                Ok(locked) => return Ok(locked),
                Err((back, nix::errno::Errno::EINTR)) => file = back,
                Err((_, errno)) => {
                    return Err(HistoryError::Lock {
                        path: self.path.clone(),
                        errno,
                    });
                }
            }
        }
    }

    /// Whether the path still names the inode `locked` refers to.
    fn still_names(&self, locked: &Flock<File>) -> Result<bool, HistoryError> {
        let opened = locked.metadata().map_err(|s| self.stat_error(s))?;
        match fs::metadata(&self.path) {
            Ok(named) => Ok(opened.dev() == named.dev() && opened.ino() == named.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(self.stat_error(source)),
        }
    }

    fn temp_path(&self) -> PathBuf {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = self
            .path
            .file_name()
            .unwrap_or(OsStr::new("history"))
            .to_string_lossy();
        self.path.with_file_name(format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn open_error(&self, source: io::Error) -> HistoryError {
        HistoryError::Open {
            path: self.path.clone(),
            source,
        }
    }

    fn stat_error(&self, source: io::Error) -> HistoryError {
        HistoryError::Stat {
            path: self.path.clone(),
            source,
        }
    }
}

/// Whether the file's byte at `len - 1` is a newline (unreadable counts as yes: nothing to fix).
fn ends_with_newline(file: &File, len: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut last = [0u8; 1];
    match file.read_at(&mut last, len - 1) {
        Ok(1) => last[0] == b'\n',
        _ => true,
    }
}

/// The default history path, from explicit inputs (see [`History::default_path`]).
/// A relative or empty `XDG_STATE_HOME` is ignored, as the XDG spec requires.
pub fn default_path_for(
    system: bool,
    euid: u32,
    xdg_state_home: Option<&OsStr>,
    home: Option<&Path>,
) -> PathBuf {
    if system {
        return PathBuf::from("/var/lib/cordon/history.jsonl");
    }
    let base = match xdg_state_home.map(Path::new) {
        Some(xdg) if xdg.is_absolute() => xdg.to_path_buf(),
        _ => match home {
            Some(home) => home.join(".local").join("state"),
            None => std::env::temp_dir().join(format!("cordon-{euid}")),
        },
    };
    base.join("cordon").join("history.jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    fn record(id: &str, language: &str) -> Record {
        Record {
            execution_id: id.to_string(),
            timestamp: now_rfc3339(),
            language: language.to_string(),
            code_length: 42,
            success: true,
            status: "ok".to_string(),
            exit_code: Some(0),
            signal: None,
            compile_cached: None,
            execution_time: 0.125,
            cpu_time: Some(0.0625),
            memory_used: Some(8 << 20),
        }
    }

    fn lines_of(path: &Path) -> Vec<String> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A history directory someone else made first (the /tmp fallback of a caller without a
    /// home), or one others may write, is refused; a history file that is a symlink is never
    /// followed.
    #[test]
    fn a_history_others_could_replace_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let r = record(&Record::new_id(), "python");
        let dir = tmp.path().join("cordon-4242/cordon");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = History::new(dir.join("history.jsonl"), DEFAULT_MAX_BYTES)
            .append(&r)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not safe") && e.contains("777"), "{e}");
        if nix::unistd::geteuid().is_root() {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&dir, Some(4343), None).unwrap();
            let e = History::new(dir.join("history.jsonl"), DEFAULT_MAX_BYTES)
                .append(&r)
                .unwrap_err()
                .to_string();
            assert!(e.contains("uid 4343"), "{e}");
            std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
            // The directory above, someone else's and writable: refused too.
            let top = tmp.path().join("cordon-4242");
            std::os::unix::fs::chown(&top, Some(4343), None).unwrap();
            let e = History::new(dir.join("history.jsonl"), DEFAULT_MAX_BYTES)
                .append(&r)
                .unwrap_err()
                .to_string();
            assert!(e.contains("4343") && e.contains("another user"), "{e}");
            std::os::unix::fs::chown(&top, Some(0), None).unwrap();
            // Another user's symlink on the way, to a directory that is the caller's own.
            let link = tmp.path().join("cordon-4444");
            std::os::unix::fs::symlink(&top, &link).unwrap();
            std::os::unix::fs::lchown(&link, Some(4444), None).unwrap();
            let e = History::new(link.join("cordon/history.jsonl"), DEFAULT_MAX_BYTES)
                .append(&r)
                .unwrap_err()
                .to_string();
            assert!(e.contains("cordon-4444 is a symlink of uid 4444"), "{e}");
        } else {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        }
        let victim = tmp.path().join("victim");
        fs::write(&victim, "mine\n").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("history.jsonl")).unwrap();
        assert!(
            History::new(dir.join("history.jsonl"), DEFAULT_MAX_BYTES)
                .append(&r)
                .is_err()
        );
        assert_eq!(fs::read_to_string(&victim).unwrap(), "mine\n");
    }

    /// The history is opened by its directory's real path, so that no symlink on the way can
    /// lead a later open elsewhere than what was checked.
    #[test]
    fn the_parent_is_resolved_to_its_real_path() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let h = History::new(tmp.path().join("link/state/h.jsonl"), DEFAULT_MAX_BYTES);
        assert_eq!(
            h.create_parent().unwrap(),
            Some(fs::canonicalize(&real).unwrap().join("state"))
        );
    }

    #[test]
    fn append_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state/cordon/history.jsonl");
        let history = History::new(&path, DEFAULT_MAX_BYTES);
        assert_eq!(history.last(10).unwrap(), vec![]);
        let mut r = record(&Record::new_id(), "python");
        r.cpu_time = None;
        r.memory_used = None;
        r.success = false;
        r.status = "timeout".to_string();
        history.append(&r).unwrap();
        assert_eq!(history.last(10).unwrap(), vec![r]);
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn record_uses_the_result_field_names() {
        let mut rec = record("id1", "go");
        rec.signal = Some("SIGKILL".into());
        rec.compile_cached = Some(true);
        let value = serde_json::to_value(&rec).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "codeLength",
                "compileCached",
                "cpuTime",
                "executionId",
                "executionTime",
                "exitCode",
                "language",
                "memoryUsed",
                "signal",
                "status",
                "success",
                "timestamp"
            ]
        );
        // A record of an older cordon, without them, still reads.
        let old = r#"{"executionId":"x","timestamp":"2026-01-01T00:00:00.000Z","language":"go","codeLength":1,"success":true,"status":"ok","executionTime":1.0,"cpuTime":null,"memoryUsed":null}"#;
        let back: Record = serde_json::from_str(old).unwrap();
        assert_eq!(
            (back.exit_code, back.signal, back.compile_cached),
            (None, None, None)
        );
    }

    #[test]
    fn concurrent_appends_are_whole_and_all_there() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("history.jsonl");
        let threads: Vec<_> = (0..8)
            .map(|t| {
                // One History (and so one open file description per append) per thread, as
                // separate processes would have: flock locks conflict between them.
                let history = History::new(&path, DEFAULT_MAX_BYTES);
                std::thread::spawn(move || {
                    for i in 0..50 {
                        history
                            .append(&record(&format!("t{t}-{i}"), "node"))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let lines = lines_of(&path);
        assert_eq!(lines.len(), 400);
        let ids: HashSet<String> = lines
            .iter()
            .map(|l| serde_json::from_str::<Record>(l).unwrap().execution_id)
            .collect();
        assert_eq!(ids.len(), 400);
        let tail = History::new(&path, DEFAULT_MAX_BYTES).tail(1000).unwrap();
        assert_eq!((tail.records.len(), tail.malformed), (400, 0));
    }

    #[test]
    fn rotation_keeps_the_newest_records_within_the_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("history.jsonl");
        let line_len = serde_json::to_vec(&record("id-000", "rust")).unwrap().len() as u64 + 1;
        let max = 20 * line_len;
        let history = History::new(&path, max);
        for i in 0..100 {
            history
                .append(&record(&format!("id-{i:03}"), "rust"))
                .unwrap();
            assert!(fs::metadata(&path).unwrap().len() <= max, "after {i}");
        }
        let ids: Vec<String> = history
            .last(1000)
            .unwrap()
            .into_iter()
            .map(|r| r.execution_id)
            .collect();
        // The kept records are the newest, in order, with no gap.
        assert!(ids.len() >= 10 && ids.len() <= 20, "{}", ids.len());
        let expected: Vec<String> = (100 - ids.len()..100)
            .map(|i| format!("id-{i:03}"))
            .collect();
        assert_eq!(ids, expected);
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        // No temp file left behind.
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn concurrent_appends_with_rotation_stay_whole_ordered_and_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("history.jsonl");
        let max = 8 * 1024;
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let history = History::new(&path, max);
                std::thread::spawn(move || {
                    for i in 0..50 {
                        history
                            .append(&record(&format!("t{t}-{i:02}"), "go"))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(fs::metadata(&path).unwrap().len() <= max);
        let tail = History::new(&path, max).tail(10_000).unwrap();
        assert_eq!(tail.malformed, 0);
        assert!(!tail.records.is_empty());
        // A rotation keeps a suffix of the global append order, so each thread's surviving
        // records are a gapless run, in the order it appended them.
        let mut last_seen: Vec<Option<usize>> = vec![None; 8];
        for r in &tail.records {
            let (t, i) = r.execution_id[1..].split_once('-').unwrap();
            let (t, i): (usize, usize) = (t.parse().unwrap(), i.parse().unwrap());
            if let Some(prev) = last_seen[t] {
                assert_eq!(i, prev + 1, "thread {t}: gap or reorder");
            }
            last_seen[t] = Some(i);
        }
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("history.jsonl");
        let good = |id: &str| serde_json::to_string(&record(id, "bash")).unwrap();
        let content = format!(
            "{}\nnot json\n{}\n{{\"executionId\":\"x\"}}\n\n{}\n{}",
            good("a"),
            good("b"),
            good("c"),
            &good("torn")[..30]
        );
        fs::write(&path, content).unwrap();
        let history = History::new(&path, DEFAULT_MAX_BYTES);
        let tail = history.tail(10).unwrap();
        let ids: Vec<&str> = tail
            .records
            .iter()
            .map(|r| r.execution_id.as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(tail.malformed, 3);
        // An append after a torn last line ends that line first and stays readable.
        history.append(&record("d", "bash")).unwrap();
        let ids: Vec<String> = history
            .last(2)
            .unwrap()
            .into_iter()
            .map(|r| r.execution_id)
            .collect();
        assert_eq!(ids, ["c", "d"]);
    }

    #[test]
    fn last_returns_the_newest_oldest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let history = History::new(tmp.path().join("h.jsonl"), DEFAULT_MAX_BYTES);
        for i in 1..=5 {
            history.append(&record(&i.to_string(), "python")).unwrap();
        }
        let ids = |n| -> Vec<String> {
            history
                .last(n)
                .unwrap()
                .into_iter()
                .map(|r| r.execution_id)
                .collect()
        };
        assert_eq!(ids(3), ["3", "4", "5"]);
        assert_eq!(ids(5), ["1", "2", "3", "4", "5"]);
        assert_eq!(ids(100), ["1", "2", "3", "4", "5"]);
        assert!(ids(0).is_empty());
    }

    #[test]
    fn rfc3339_of_known_instants() {
        let at = |secs: i64, millis: u64| {
            let d = Duration::from_secs(secs.unsigned_abs());
            let t = if secs >= 0 {
                UNIX_EPOCH + d
            } else {
                UNIX_EPOCH - d
            };
            rfc3339_utc(t + Duration::from_millis(millis))
        };
        // Expected values from `date -u -d @SECS +%FT%TZ`.
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(-1, 0), "1969-12-31T23:59:59.000Z");
        assert_eq!(at(-1, 250), "1969-12-31T23:59:59.250Z");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_000_000_000, 0), "2001-09-09T01:46:40.000Z");
        assert_eq!(at(1_234_567_890, 789), "2009-02-13T23:31:30.789Z");
        assert_eq!(at(1_709_164_800, 1), "2024-02-29T00:00:00.001Z");
        assert_eq!(at(4_102_444_799, 999), "2099-12-31T23:59:59.999Z");
        assert_eq!(at(253_402_300_799, 0), "9999-12-31T23:59:59.000Z");
        assert_eq!(at(-62_135_596_800, 0), "0001-01-01T00:00:00.000Z");
        // Sub-millisecond parts truncate toward the earlier millisecond.
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH + Duration::from_nanos(1_999_999)),
            "1970-01-01T00:00:00.001Z"
        );
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_nanos(1)),
            "1969-12-31T23:59:59.999Z"
        );
        // Every day of four years round-trips through the date arithmetic.
        let mut prev = String::new();
        for day in 10_950..(10_950 + 4 * 366) {
            let s = at(day * 86_400, 0);
            assert!(s > prev, "{s} after {prev}");
            assert!(s.ends_with("T00:00:00.000Z"));
            prev = s;
        }
    }

    #[test]
    fn new_ids_are_unique_hex() {
        let ids: HashSet<String> = (0..1000).map(|_| Record::new_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert!(
                id.chars().all(|c| c.is_ascii_hexdigit() || c == '-'),
                "{id}"
            );
        }
    }

    #[test]
    fn default_path_follows_xdg_and_root() {
        let home = Path::new("/home/u");
        assert_eq!(
            default_path_for(true, 0, Some(OsStr::new("/x")), Some(home)),
            PathBuf::from("/var/lib/cordon/history.jsonl")
        );
        assert_eq!(
            default_path_for(false, 1000, Some(OsStr::new("/xdg/state")), Some(home)),
            PathBuf::from("/xdg/state/cordon/history.jsonl")
        );
        for xdg in [None, Some(OsStr::new("")), Some(OsStr::new("rel"))] {
            assert_eq!(
                default_path_for(false, 1000, xdg, Some(home)),
                PathBuf::from("/home/u/.local/state/cordon/history.jsonl")
            );
        }
    }
}

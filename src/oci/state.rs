//! The state directory of one container: `<root>/<id>/`.
//!
//! - `state.json`: the OCI state plus what cordon needs later (the init's start time, its
//!   cgroup directories, the hooks, whether it was created rootless);
//! - `exec.fifo`: exists from `create` until `start`. The container's init holds it open
//!   (close-on-exec) until its execve, and blocks reading it; `start` writes one byte,
//!   removes it, and waits until it has no reader left (the program runs).
//!
//! The status is never stored as truth: it is derived from the init's pid AND its start
//! time (field 22 of /proc/PID/stat), so a pid reused by another process reads as stopped.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "container id {0:?} is invalid: use letters, digits, `_`, `+`, `-` and `.` (not starting with `.`)"
    )]
    BadId(String),
    #[error(
        "container id {0:?}... is {1} bytes long: give one of at most {MAX_ID_LEN} (it names the container's state directory and its default cgroup, `cordon-ID`, and a file name holds at most 255 bytes)"
    )]
    IdTooLong(String, usize),
    #[error("container {0} does not exist")]
    NotFound(String),
    #[error("container {0} already exists")]
    Exists(String),
    #[error("cannot {step} {path}: {source}")]
    Io {
        step: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error(
        "refusing the state {path}: {why}; state that another user can write could make cordon-oci signal any process, remove any directory or run any program (hooks) as {owner}: remove it, or use a --root owned by uid {owner} and not writable by group or others"
    )]
    Unsafe {
        path: String,
        why: String,
        owner: u32,
    },
    #[error(
        "refusing {path} as the base of cordon-oci's state (used because XDG_RUNTIME_DIR is not set): {why}; in the shared /tmp, another user could swap the state cordon-oci trusts (the pid it signals, the hooks it runs as uid {owner}): remove it if it is not yours, or set XDG_RUNTIME_DIR to a private directory, or pass --root DIR"
    )]
    UnsafeBase {
        path: String,
        why: String,
        owner: u32,
    },
    #[error("the state of container {id} is invalid ({path}): {why}")]
    Invalid {
        id: String,
        path: String,
        why: String,
    },
    #[error("the state of container {id} is corrupt ({path}): {source}")]
    Corrupt {
        id: String,
        path: String,
        source: serde_json::Error,
    },
}

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StateError {
    let path = path.display().to_string();
    move |source| StateError::Io { step, path, source }
}

/// What `state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    pub oci_version: String,
    pub id: String,
    pub pid: i32,
    pub bundle: String,
    #[serde(default)]
    pub annotations: HashMap<String, String>,
    /// /proc/PID/stat field 22 of the init when it was created.
    pub start_time: u64,
    /// RFC 3339 creation time.
    pub created: String,
    /// The container's root directory on the host (absolute; empty in a state written by a
    /// cordon-oci that did not keep it).
    #[serde(default)]
    pub rootfs: String,
    /// The cgroup directories of the container (one per v1 hierarchy, or the v2 one).
    #[serde(default)]
    pub cgroup_dirs: Vec<PathBuf>,
    /// The hooks of config.json (poststart and poststop run after the bundle may be gone).
    #[serde(default)]
    pub hooks: Option<oci_spec::runtime::Hooks>,
    pub rootless: bool,
    pub owner: u32,
    /// The container has a pid namespace of its own (killing its init kills the rest).
    pub own_pid_ns: bool,
    /// config.json had a `process`.
    #[serde(default = "yes")]
    pub has_process: bool,
    /// The device rules the container's cgroup enforces (`cgroup::device_allowlist` at
    /// create, then each `update`'s), which an `update` on cgroup v2 builds its new device
    /// program from. `None`: none were enforced (created unprivileged or without a cgroup),
    /// or the container was created by a cordon-oci that did not keep them.
    #[serde(default)]
    pub device_rules: Option<Vec<crate::oci::cgroup::DeviceRule>>,
    /// Its processes get a new session keyring (not `create --no-new-keyring`); `exec`
    /// follows it, as runc's does.
    #[serde(default = "yes")]
    pub new_keyring: bool,
    /// The systemd scope a `--systemd-cgroup` create obtained for the container, which
    /// delete asks the same manager to stop. `None`: the container's cgroup is cordon-oci's
    /// own, or the state was written by a cordon-oci that did not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd_scope: Option<SystemdScope>,
}

/// A systemd unit holding a container's cgroup ([`Stored::systemd_scope`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemdScope {
    /// The unit's name (`cordon-ID.scope`).
    pub unit: String,
    /// Of the system manager (root); else of the caller's user manager.
    pub system: bool,
}

fn yes() -> bool {
    true
}

/// The OCI state (runtime spec, "State").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciState {
    pub oci_version: String,
    pub id: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    pub bundle: String,
    #[serde(skip_serializing_if = "HashMap::is_empty", default)]
    pub annotations: HashMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Creating,
    Created,
    Running,
    Paused,
    Stopped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Stopped => "stopped",
        })
    }
}

/// The longest container id: `cordon-ID` (a default cgroup name) must fit in a file name.
pub const MAX_ID_LEN: usize = 255 - "cordon-".len();

/// Checks a container id (it becomes a directory name).
pub fn check_id(id: &str) -> Result<(), StateError> {
    if id.len() > MAX_ID_LEN {
        let head: String = id.chars().take(32).collect();
        return Err(StateError::IdTooLong(head, id.len()));
    }
    let ok = !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(StateError::BadId(id.into()))
    }
}

/// The state directory of `id` under `root`.
pub fn dir(root: &Path, id: &str) -> Result<PathBuf, StateError> {
    check_id(id)?;
    Ok(root.join(id))
}

pub fn fifo_path(dir: &Path) -> PathBuf {
    dir.join("exec.fifo")
}

/// Checks that `path` (not followed if a symlink) belongs to this process's euid and that
/// neither group nor others may write it: state.json names the pid cordon-oci signals, the
/// cgroups it removes and the hooks it runs, so it must be as trusted as the caller.
pub fn check_owned(path: &Path) -> Result<(), StateError> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let md = std::fs::symlink_metadata(path).map_err(io("inspect", path))?;
    let why = if md.file_type().is_symlink() {
        Some("it is a symlink".to_string())
    } else if md.uid() != me {
        Some(format!("it belongs to uid {}, not {me}", md.uid()))
    } else if md.mode() & 0o022 != 0 {
        Some(format!(
            "its mode {:o} lets group or others write it",
            md.mode() & 0o7777
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(StateError::Unsafe {
            path: path.display().to_string(),
            why,
            owner: me,
        }),
    }
}

/// `TMP/cordon-EUID`, the base of a rootless caller's state root when XDG_RUNTIME_DIR is
/// unset: made here (mode 0700) when missing, and refused unless it is a real directory of
/// `euid` that no one else may write, in a `TMP` no one else may rename entries of (sticky,
/// as /tmp is). Anyone can make that name first in a shared /tmp, as a symlink they can
/// re-point at will or a directory of their own, and so choose the state.json that
/// `delete` trusts; once it is the caller's own, no one else can replace it.
pub fn private_tmp_dir(tmp: &Path, euid: u32) -> Result<PathBuf, StateError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let base = tmp.join(format!("cordon-{euid}"));
    let unsafe_base = |why: String| StateError::UnsafeBase {
        path: base.display().to_string(),
        why,
        owner: euid,
    };
    let t = std::fs::metadata(tmp).map_err(io("inspect", tmp))?;
    if t.uid() != 0 && t.uid() != euid {
        // In a user namespace the host's root shows as the overflow uid (65534).
        return Err(unsafe_base(format!(
            "{} belongs to uid {}, neither root nor {euid}, who could replace what is in it (in a user namespace, where the host's root shows as 65534, /tmp cannot be vetted)",
            tmp.display(),
            t.uid()
        )));
    }
    if t.mode() & 0o002 != 0 && t.mode() & 0o1000 == 0 {
        return Err(unsafe_base(format!(
            "{} (mode {:o}) is writable by others and not sticky: they may rename what is in it",
            tmp.display(),
            t.mode() & 0o7777
        )));
    }
    // Not recursive, so a symlink already there is not followed: it stays, and is refused.
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("create", &base)(e)),
    }
    let md = std::fs::symlink_metadata(&base).map_err(io("inspect", &base))?;
    let why = if md.file_type().is_symlink() {
        format!("it is a symlink of uid {}", md.uid())
    } else if !md.is_dir() {
        "it is not a directory".to_string()
    } else if md.uid() != euid {
        format!("it belongs to uid {}", md.uid())
    } else if md.mode() & 0o022 != 0 {
        format!(
            "its mode {:o} lets group or others write it",
            md.mode() & 0o7777
        )
    } else {
        return Ok(base);
    };
    Err(unsafe_base(why))
}

/// Creates the state directory (and `root`, mode 0700).
pub fn create_dir(root: &Path, id: &str) -> Result<PathBuf, StateError> {
    use std::os::unix::fs::DirBuilderExt;
    let d = dir(root, id)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(io("create the state root", root))?;
    check_owned(root)?;
    match std::fs::DirBuilder::new().mode(0o700).create(&d) {
        Ok(()) => Ok(d),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(StateError::Exists(id.into()))
        }
        Err(e) => Err(io("create the state directory", &d)(e)),
    }
}

/// Writes `state.json` atomically.
pub fn save(dir: &Path, s: &Stored) -> Result<(), StateError> {
    let path = dir.join("state.json");
    let tmp = dir.join(".state.json.tmp");
    let bytes = serde_json::to_vec(s).unwrap_or_default();
    // Mode 0600 whatever the caller's umask: `load` refuses a state others may write.
    let _ = std::fs::remove_file(&tmp);
    let mut f = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io("write", &tmp))?
    };
    std::io::Write::write_all(&mut f, &bytes).map_err(io("write", &tmp))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(io("rename into place", &path))
}

/// Keeps the container's config (as `create` checked it) as `config.json`, mode 0600.
pub fn save_config(dir: &Path, json: &[u8]) -> Result<(), StateError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("config.json");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(io("write", &path))?;
    std::io::Write::write_all(&mut f, json).map_err(io("write", &path))
}

/// Holds an exclusive `flock(2)` on the state directory until dropped: taken by the
/// commands that read, change and write back what the container enforces (`update`), so
/// that two of them do not interleave.
pub fn lock(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, StateError> {
    let mut f = std::fs::File::open(dir).map_err(io("open", dir))?;
    loop {
        match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive) {
            Ok(l) => return Ok(l),
            // A signal interrupted the wait: wait again.
            Err((back, nix::errno::Errno::EINTR)) => f = back,
            Err((_, e)) => return Err(io("lock (flock)", dir)(e.into())),
        }
    }
}

/// The config `create` kept (see [`save_config`]), checked like `state.json`.
pub fn load_config(dir: &Path) -> Result<Vec<u8>, StateError> {
    let path = dir.join("config.json");
    check_owned(&path)?;
    std::fs::read(&path).map_err(io("read", &path))
}

/// Reads `state.json` of `id`.
pub fn load(root: &Path, id: &str) -> Result<(PathBuf, Stored), StateError> {
    let d = dir(root, id)?;
    let path = d.join("state.json");
    if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Err(StateError::NotFound(id.into()));
    }
    for p in [root, d.as_path(), path.as_path()] {
        check_owned(p)?;
    }
    let bytes = std::fs::read(&path).map_err(io("read", &path))?;
    let s: Stored = serde_json::from_slice(&bytes).map_err(|source| StateError::Corrupt {
        id: id.into(),
        path: path.display().to_string(),
        source,
    })?;
    let invalid = |why: String| StateError::Invalid {
        id: id.into(),
        path: path.display().to_string(),
        why,
    };
    if s.id != id {
        return Err(invalid(format!("it names container {:?}", s.id)));
    }
    // kill(2) with 0 or a negative pid signals process groups, or every process.
    if s.pid <= 1 {
        return Err(invalid(format!("pid {} is not a container's init", s.pid)));
    }
    for c in &s.cgroup_dirs {
        let inside = c.starts_with("/sys/fs/cgroup")
            && c.components().all(|x| {
                matches!(
                    x,
                    std::path::Component::RootDir | std::path::Component::Normal(_)
                )
            });
        if !inside || c == Path::new("/sys/fs/cgroup") {
            return Err(invalid(format!(
                "cgroup directory {} is not below /sys/fs/cgroup",
                c.display()
            )));
        }
    }
    Ok((d, s))
}

/// (state letter, start time) of a live process, from /proc/PID/stat.
pub fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&s)
}

/// Parses /proc/PID/stat: the comm field may hold spaces and parentheses, so fields are
/// counted from the LAST `)`.
pub fn parse_stat(s: &str) -> Option<(char, u64)> {
    let rest = &s[s.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); start time is field 22.
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// Whether the container's init is the process it was (alive, same start time, not a zombie).
pub fn init_alive(s: &Stored) -> bool {
    matches!(proc_stat(s.pid), Some((st, start)) if start == s.start_time && st != 'Z' && st != 'X')
}

/// The status derived from the host.
pub fn status(dir: &Path, s: &Stored) -> Status {
    if !init_alive(s) {
        return Status::Stopped;
    }
    if crate::oci::cgroup::is_frozen(&s.cgroup_dirs) {
        return Status::Paused;
    }
    if fifo_path(dir).exists() {
        Status::Created
    } else {
        Status::Running
    }
}

impl Stored {
    /// What `state` prints: the OCI state, with what runc's adds (and go-runc, which
    /// containerd's shim uses, reads): `rootfs`, `created` and `owner` (the user name of the
    /// uid that created the container, or the uid without a name).
    pub fn state_output(&self, status: Status) -> serde_json::Value {
        let mut v = serde_json::to_value(self.oci(status)).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("rootfs".into(), self.rootfs.clone().into());
            o.insert("created".into(), self.created.clone().into());
            o.insert("owner".into(), self.owner_name().into());
        }
        v
    }

    /// The user name of [`Stored::owner`], or its number without one.
    pub fn owner_name(&self) -> String {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(self.owner))
            .ok()
            .flatten()
            .map_or_else(|| self.owner.to_string(), |u| u.name)
    }

    /// The OCI state with the given status.
    pub fn oci(&self, status: Status) -> OciState {
        OciState {
            oci_version: self.oci_version.clone(),
            id: self.id.clone(),
            status,
            pid: (status != Status::Stopped).then_some(self.pid),
            bundle: self.bundle.clone(),
            annotations: self.annotations.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_odd_names() {
        let line =
            "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parse_stat(line), Some(('S', 987654)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn ids() {
        for ok in ["a", "abc-1.2_x+y", "0"] {
            assert!(check_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", ".hidden", "a b", "a\0"] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ids_fit_a_file_name() {
        assert!(check_id(&"a".repeat(MAX_ID_LEN)).is_ok());
        let e = check_id(&"a".repeat(300)).unwrap_err().to_string();
        assert!(e.contains("300 bytes") && e.contains("at most 248"), "{e}");
    }

    fn sample(id: &str) -> Stored {
        Stored {
            oci_version: "1.0.2".into(),
            id: id.into(),
            pid: 42,
            bundle: "/b".into(),
            annotations: HashMap::new(),
            start_time: 1,
            created: "x".into(),
            rootfs: "/b/rootfs".into(),
            cgroup_dirs: vec![],
            hooks: None,
            rootless: false,
            owner: 0,
            own_pid_ns: true,
            has_process: true,
            device_rules: None,
            new_keyring: true,
            systemd_scope: None,
        }
    }

    #[test]
    fn the_systemd_scope_is_kept_and_absent_from_older_states() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let d = create_dir(&root, "c1").unwrap();
        let mut s = sample("c1");
        s.systemd_scope = Some(SystemdScope {
            unit: "cordon-c1.scope".into(),
            system: true,
        });
        save(&d, &s).unwrap();
        assert_eq!(load(&root, "c1").unwrap().1.systemd_scope, s.systemd_scope);
        // A state without the field (none obtained, or an older cordon-oci's): None.
        save(&d, &sample("c1")).unwrap();
        let text = std::fs::read_to_string(d.join("state.json")).unwrap();
        assert!(!text.contains("systemdScope"), "{text}");
        assert_eq!(load(&root, "c1").unwrap().1.systemd_scope, None);
    }

    #[test]
    fn the_tmp_base_must_be_the_callers_own_real_directory() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let euid = nix::unistd::geteuid().as_raw();
        let t = tempfile::tempdir().unwrap();
        mode(t.path(), 0o1777);
        let base = t.path().join(format!("cordon-{euid}"));
        // Missing: made, private. Present and ours: taken as it is.
        for _ in 0..2 {
            assert_eq!(private_tmp_dir(t.path(), euid).unwrap(), base);
            let md = std::fs::symlink_metadata(&base).unwrap();
            assert!(md.is_dir() && md.uid() == euid && md.mode() & 0o777 == 0o700);
        }
        let refused = |want: &str| {
            let e = private_tmp_dir(t.path(), euid).unwrap_err();
            assert!(matches!(e, StateError::UnsafeBase { .. }), "{e}");
            let e = e.to_string();
            assert!(
                e.contains(want) && e.contains(&base.display().to_string()),
                "{e}"
            );
            assert!(e.contains("XDG_RUNTIME_DIR") && e.contains("--root"), "{e}");
        };
        mode(&base, 0o777);
        refused("mode 777");
        std::fs::remove_dir(&base).unwrap();
        // A symlink, even to a private directory: whoever made it may re-point it.
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        mode(&elsewhere, 0o700);
        std::os::unix::fs::symlink(&elsewhere, &base).unwrap();
        refused("symlink");
        std::fs::remove_file(&base).unwrap();
        std::fs::write(&base, "").unwrap();
        refused("not a directory");
        std::fs::remove_file(&base).unwrap();
        // Another user's directory (needs root to make one).
        std::fs::create_dir(&base).unwrap();
        if nix::unistd::chown(&base, Some(nix::unistd::Uid::from_raw(euid + 4242)), None).is_ok() {
            refused(&format!("belongs to uid {}", euid + 4242));
        } else {
            eprintln!("SKIP: another user's base directory: chown needs root");
        }
        std::fs::remove_dir(&base).unwrap();
        // A temp directory whose entries others may rename.
        mode(t.path(), 0o777);
        let e = private_tmp_dir(t.path(), euid).unwrap_err().to_string();
        assert!(e.contains("writable by others and not sticky"), "{e}");
        mode(t.path(), 0o1777);
        if nix::unistd::chown(
            t.path(),
            Some(nix::unistd::Uid::from_raw(euid + 4242)),
            None,
        )
        .is_ok()
        {
            let e = private_tmp_dir(t.path(), euid).unwrap_err().to_string();
            assert!(
                e.contains(&format!("belongs to uid {}", euid + 4242)),
                "{e}"
            );
            nix::unistd::chown(t.path(), Some(nix::unistd::Uid::from_raw(euid)), None).unwrap();
        }
        mode(t.path(), 0o700);
    }

    #[test]
    fn state_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let d = create_dir(&root, "c1").unwrap();
        save(&d, &sample("c1")).unwrap();
        assert!(load(&root, "c1").is_ok());
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        // A world-writable root, state directory or state.json: refused, whatever it says.
        for (p, good) in [(&root, 0o700), (&d, 0o700), (&d.join("state.json"), 0o600)] {
            mode(p, 0o777);
            let e = load(&root, "c1").unwrap_err().to_string();
            assert!(e.contains("refusing the state") && e.contains("777"), "{e}");
            mode(p, good);
        }
        assert!(create_dir(&root, "c2").is_ok());
        mode(&root, 0o777);
        assert!(matches!(
            create_dir(&root, "c3"),
            Err(StateError::Unsafe { .. })
        ));
        mode(&root, 0o700);
        // A state.json replaced by a symlink.
        std::fs::rename(d.join("state.json"), t.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(t.path().join("elsewhere"), d.join("state.json")).unwrap();
        assert!(matches!(load(&root, "c1"), Err(StateError::Unsafe { .. })));
    }

    #[test]
    fn state_fields_that_reach_outside_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let d = create_dir(&root, "c1").unwrap();
        let bad = |f: &dyn Fn(&mut Stored)| {
            let mut s = sample("c1");
            f(&mut s);
            save(&d, &s).unwrap();
            load(&root, "c1").map(|_| ()).unwrap_err().to_string()
        };
        assert!(bad(&|s| s.pid = -1).contains("pid -1"));
        assert!(bad(&|s| s.pid = 0).contains("pid 0"));
        assert!(bad(&|s| s.id = "other".into()).contains("names container"));
        for dir in [
            "/etc",
            "/sys/fs/cgroup/../../etc",
            "/sys/fs/cgroup",
            "sys/fs/cgroup/x",
        ] {
            let e = bad(&|s| s.cgroup_dirs = vec![dir.into()]);
            assert!(e.contains("not below /sys/fs/cgroup"), "{dir}: {e}");
        }
        save(&d, &sample("c1")).unwrap();
        assert!(load(&root, "c1").is_ok());
    }

    #[test]
    fn a_state_without_device_rules_still_loads() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let d = create_dir(&root, "c1").unwrap();
        let mut s = sample("c1");
        s.device_rules = Some(crate::oci::cgroup::device_allowlist(&[]).unwrap());
        save(&d, &s).unwrap();
        let (_, back) = load(&root, "c1").unwrap();
        assert_eq!(back.device_rules, s.device_rules);
        // A state.json written before the field existed.
        let mut v = serde_json::to_value(&s).unwrap();
        v.as_object_mut().unwrap().remove("deviceRules").unwrap();
        let old = serde_json::to_vec(&v).unwrap();
        assert!(!String::from_utf8_lossy(&old).contains("deviceRules"));
        // (Written over the saved file, which keeps its mode 0600.)
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(d.join("state.json"))
            .unwrap();
        std::io::Write::write_all(&mut f, &old).unwrap();
        drop(f);
        assert_eq!(load(&root, "c1").unwrap().1.device_rules, None);
    }

    #[test]
    fn state_json_has_the_spec_fields() {
        let s = sample("c1");
        let v = serde_json::to_value(s.oci(Status::Created)).unwrap();
        assert_eq!(v["ociVersion"], "1.0.2");
        assert_eq!(v["status"], "created");
        assert_eq!(v["pid"], 42);
        assert_eq!(v["bundle"], "/b");
        let v = serde_json::to_value(s.oci(Status::Stopped)).unwrap();
        assert!(v.get("pid").is_none());
        // The hooks' state is the spec's; `state` adds runc's fields.
        assert!(
            v.get("rootfs").is_none() && v.get("created").is_none(),
            "{v}"
        );
        let v = s.state_output(Status::Running);
        assert_eq!(v["rootfs"], "/b/rootfs");
        assert_eq!(v["created"], "x");
        assert_eq!(v["owner"], "root");
        assert_eq!(v["pid"], 42);
        let mut nameless = sample("c2");
        nameless.owner = 4_000_000;
        assert_eq!(nameless.state_output(Status::Running)["owner"], "4000000");
    }
}

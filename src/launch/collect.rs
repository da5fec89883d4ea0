//! Files in and out of /workspace, done by the sandbox's init.
//!
//! In: before the payload exists, init writes the input files (`O_EXCL`, `O_NOFOLLOW`) into
//! the fresh workspace tmpfs. No host path is involved, so nothing the sandbox plants can
//! redirect the write.
//!
//! Out: once the payload's main process has exited, init SIGKILLs every other process of the
//! pid namespace and reaps them all, so nothing can change /workspace any more; then it walks
//! the tree with directory fds only (`openat` + `O_NOFOLLOW`, `fstatat(AT_SYMLINK_NOFOLLOW)`),
//! sends regular files to the parent over the report pipe, and lists what it left behind
//! (symlinks, FIFOs, sockets, devices, setuid files, anything over the caps) and why. A FIFO is
//! never opened, so it cannot hang the collection.

use super::channel::{Msg, Reporter};
use crate::spec::{Collect, InputFile, WORKSPACE, check_relative_path};
use base64::Engine;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

/// Deepest directory level walked.
const MAX_DEPTH: usize = 32;
/// At most this many "omitted" entries are listed; the rest are counted in one line.
const MAX_OMITTED: usize = 200;

/// Writes the input files into the workspace. Runs in init, before the payload is forked.
pub fn write_inputs(files: &[InputFile]) -> Result<(), String> {
    let ws = std::path::Path::new(WORKSPACE);
    for f in files {
        let path = ws.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("create {}: {e} (is the name given twice?)", path.display()))?;
        std::io::Write::write_all(&mut file, &f.contents).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENOSPC) {
                "; raise --workspace-size"
            } else {
                ""
            };
            format!("write {}: {e}{hint}", path.display())
        })?;
        file.set_permissions(std::fs::Permissions::from_mode(f.mode & 0o777))
            .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Kills every process of the pid namespace but init and reaps them all.
pub fn kill_and_reap_all() {
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    while let Ok(_) | Err(Errno::EINTR) = waitpid(None, Some(WaitPidFlag::__WALL)) {}
}

struct Walk<'a> {
    spec: &'a Collect,
    inputs: &'a [InputFile],
    report: &'a Reporter,
    files: usize,
    bytes: u64,
    omitted: usize,
}

impl Walk<'_> {
    fn omit(&mut self, path: &str, reason: &str) {
        self.omitted += 1;
        if self.omitted <= MAX_OMITTED {
            let _ = self.report.send_large(&Msg::FileOmitted {
                path: path.into(),
                reason: reason.into(),
            });
        }
    }

    /// Whether `path` is wanted, or is a directory on the way to a wanted path.
    fn wanted(&self, path: &str, is_dir: bool) -> bool {
        match &self.spec.only {
            None => true,
            Some(only) => only
                .iter()
                .any(|o| o == path || (is_dir && o.starts_with(&format!("{path}/")))),
        }
    }

    fn walk(&mut self, dir: &OwnedFd, prefix: &str, depth: usize) {
        let names = match list(dir) {
            Ok(n) => n,
            Err(e) => {
                return self.omit(
                    if prefix.is_empty() { "." } else { prefix },
                    &format!("cannot list: {e}"),
                );
            }
        };
        for name in names {
            let Ok(name_str) = std::str::from_utf8(&name) else {
                self.omit(
                    &format!("{prefix}{}", String::from_utf8_lossy(&name)),
                    "name is not valid UTF-8",
                );
                continue;
            };
            let path = if prefix.is_empty() {
                name_str.to_string()
            } else {
                format!("{prefix}/{name_str}")
            };
            if let Err(e) = check_relative_path(&path) {
                self.omit(&path, &e.hint);
                continue;
            }
            let st = match fstatat(dir, name.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(e) => {
                    self.omit(&path, &format!("cannot stat: {e}"));
                    continue;
                }
            };
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind == SFlag::S_IFDIR {
                if !self.wanted(&path, true) {
                    continue;
                }
                if depth >= MAX_DEPTH {
                    self.omit(&path, "directory nested deeper than 32 levels");
                    continue;
                }
                let flags =
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                match openat(dir, name.as_slice(), flags, Mode::empty()) {
                    Ok(sub) => self.walk(&sub, &path, depth + 1),
                    Err(e) => self.omit(&path, &format!("cannot open directory: {e}")),
                }
                continue;
            }
            if !self.wanted(&path, false) {
                continue;
            }
            let reason = match kind {
                SFlag::S_IFREG if st.st_mode & 0o6000 != 0 => Some("setuid/setgid file"),
                SFlag::S_IFREG => None,
                SFlag::S_IFLNK => Some("symbolic link (not followed)"),
                SFlag::S_IFIFO => Some("FIFO"),
                SFlag::S_IFSOCK => Some("socket"),
                SFlag::S_IFCHR | SFlag::S_IFBLK => Some("device node"),
                _ => Some("not a regular file"),
            };
            if let Some(r) = reason {
                self.omit(&path, r);
                continue;
            }
            self.file(dir, &name, &path, st.st_size as u64);
        }
    }

    fn file(&mut self, dir: &OwnedFd, name: &[u8], path: &str, size: u64) {
        if self.files >= self.spec.max_files {
            return self.omit(path, "over the file-count cap");
        }
        if self.bytes.saturating_add(size) > self.spec.max_bytes {
            return self.omit(path, "over the total-size cap");
        }
        // O_NONBLOCK: even a FIFO swapped in could not block (none can be: all are dead).
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = match openat(dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => return self.omit(path, &format!("cannot open: {e}")),
        };
        let mode = match fstat(fd.as_fd()) {
            Ok(st)
                if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
                    == SFlag::S_IFREG =>
            {
                st.st_mode & 0o777
            }
            _ => return self.omit(path, "changed type while being collected"),
        };
        let mut data = Vec::with_capacity(size as usize);
        let mut f = std::fs::File::from(fd);
        if let Err(e) = (&mut f)
            .take(self.spec.max_bytes - self.bytes + 1)
            .read_to_end(&mut data)
        {
            return self.omit(path, &format!("cannot read: {e}"));
        }
        if self.bytes + data.len() as u64 > self.spec.max_bytes {
            return self.omit(path, "over the total-size cap");
        }
        // An input file cordon put there and the program left unchanged is not news.
        if self.spec.only.is_none()
            && self
                .inputs
                .iter()
                .any(|i| i.path == path && i.contents == data)
        {
            return;
        }
        self.files += 1;
        self.bytes += data.len() as u64;
        let data = base64::engine::general_purpose::STANDARD.encode(&data);
        if let Err(e) = self.report.send_large(&Msg::File {
            path: path.into(),
            mode,
            data,
        }) {
            self.omit(path, &format!("cannot send to cordon: {e}"));
        }
    }
}

fn list(dir: &OwnedFd) -> Result<Vec<Vec<u8>>, Errno> {
    let dup = nix::unistd::dup(dir)?;
    let mut d = nix::dir::Dir::from_fd(dup)?;
    let mut names: Vec<Vec<u8>> = d
        .iter()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_bytes().to_vec())
        .filter(|n| n != b"." && n != b"..")
        .collect();
    names.sort();
    Ok(names)
}

/// Walks /workspace and sends what it finds. Runs in init after [`kill_and_reap_all`].
pub fn collect(report: &Reporter, spec: &Collect, inputs: &[InputFile]) {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let root = match nix::fcntl::open(WORKSPACE, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = report.send_large(&Msg::FileOmitted {
                path: ".".into(),
                reason: format!("cannot open /workspace: {e}"),
            });
            return;
        }
    };
    let mut w = Walk {
        spec,
        inputs,
        report,
        files: 0,
        bytes: 0,
        omitted: 0,
    };
    w.walk(&root, "", 0);
    if w.omitted > MAX_OMITTED {
        let more = w.omitted - MAX_OMITTED;
        let _ = report.send_large(&Msg::FileOmitted {
            path: "...".into(),
            reason: format!("{more} more entries not listed"),
        });
    }
}

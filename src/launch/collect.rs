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
//! never opened, so it cannot hang the collection. Each file is streamed, [`FILE_CHUNK`] bytes
//! at a time (a header line, the chunks raw, an end line: see [`Msg::FileStart`]): init is in
//! the sandbox's memory cgroup, beside the files' own tmpfs pages, and holds one chunk whatever
//! the file's size. Last comes [`Msg::CollectDone`], so that cordon can tell a collection cut
//! short (init killed) from a complete one.
//!
//! cordon's side, [`ReceivedFiles`], puts each file together in one buffer as it arrives.

use super::channel::{FILE_CHUNK, Msg, Reporter};
use crate::outcome::{OmittedFile, OutputFile};
use crate::spec::{Collect, InputFile, MAX_NAME_LEN, MAX_PATH_LEN, WORKSPACE, check_relative_path};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

/// Deepest directory level walked.
const MAX_DEPTH: usize = 32;
/// At most this many "omitted" entries are listed; the rest are counted in one line.
const MAX_OMITTED: usize = 200;

/// Writes the input files into the workspace. Runs in init, before the payload is forked.
pub fn write_inputs(files: &[InputFile]) -> Result<(), String> {
    write_files(std::path::Path::new(WORKSPACE), files)
}

/// Writes `files` (checked relative paths) under `ws`, a fresh tmpfs of the sandbox.
pub fn write_files(ws: &std::path::Path, files: &[InputFile]) -> Result<(), String> {
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
    /// Files sent (or listed) and directories reported: what the file-count cap counts.
    entries: usize,
    bytes: u64,
    omitted: usize,
    /// The report pipe failed (cordon is gone): nothing more is sent.
    broken: Option<Errno>,
    /// One chunk of a file: reused for every chunk.
    buf: Vec<u8>,
}

impl Walk<'_> {
    fn omit(&mut self, path: &str, reason: &str) {
        self.omitted += 1;
        if self.omitted <= MAX_OMITTED
            && let Err(e) = self.report.send_large(&Msg::FileOmitted {
                path: path.into(),
                reason: reason.into(),
            })
        {
            self.broken = Some(e);
        }
    }

    /// [`Self::omit`] for the entry `name` in the directory `prefix`, a name that is not
    /// UTF-8: sent as its exact bytes.
    fn omit_name(&mut self, prefix: &str, name: &[u8], reason: &str) {
        self.omitted += 1;
        if self.omitted <= MAX_OMITTED {
            let mut path = Vec::with_capacity(prefix.len() + 1 + name.len());
            if !prefix.is_empty() {
                path.extend_from_slice(prefix.as_bytes());
                path.push(b'/');
            }
            path.extend_from_slice(name);
            let msg = Msg::NameOmitted {
                path,
                reason: reason.into(),
            };
            if let Err(e) = self.report.send_large(&msg) {
                self.broken = Some(e);
            }
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

    /// Sends what is in `dir` (the directory `prefix`), at `depth` below /workspace; false
    /// when it could not be listed (it is then omitted itself).
    fn walk(&mut self, dir: &OwnedFd, prefix: &str, depth: usize) -> bool {
        let names = match list(dir) {
            Ok(n) => n,
            Err(e) => {
                self.omit(
                    if prefix.is_empty() { "." } else { prefix },
                    &format!("cannot list: {e}"),
                );
                return false;
            }
        };
        for name in names {
            if self.broken.is_some() {
                return true;
            }
            let Ok(name_str) = std::str::from_utf8(&name) else {
                // Not walked: no path below it could be given as UTF-8 either.
                let is_dir = fstatat(dir, name.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFDIR.bits());
                let reason = if is_dir {
                    "directory name is not valid UTF-8 (nothing in it was collected)"
                } else {
                    "name is not valid UTF-8"
                };
                self.omit_name(prefix, &name, reason);
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
                    Ok(sub) => {
                        let before = self.entries;
                        if self.walk(&sub, &path, depth + 1) && self.entries == before {
                            self.directory(&path);
                        }
                    }
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
        true
    }

    /// Reports the directory `path`, walked, which holds nothing sent (no file, no directory
    /// reported below it), so that the output directory has it too. Not for a collection of
    /// chosen paths (a compile's artifact), nor for a directory that cordon made for an input
    /// file (as an input file left unchanged, it is not the program's news). It counts
    /// toward the file-count cap as a file does.
    fn directory(&mut self, path: &str) {
        let holds_input = |i: &InputFile| {
            i.path
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
        };
        if self.spec.only.is_some() || self.inputs.iter().any(holds_input) {
            return;
        }
        if self.entries >= self.spec.max_files {
            return self.omit(path, &self.spec.over_files_reason());
        }
        match self
            .report
            .send_large(&Msg::DirListed { path: path.into() })
        {
            Ok(()) => self.entries += 1,
            Err(e) => self.broken = Some(e),
        }
    }

    fn file(&mut self, dir: &OwnedFd, name: &[u8], path: &str, size: u64) {
        // An input file cordon put there may be left unchanged: not news, and not counted
        // against the caps, so it is compared before them.
        let maybe_input = self.spec.only.is_none()
            && self
                .inputs
                .iter()
                .any(|i| i.path == path && i.contents.len() as u64 == size);
        if !maybe_input && self.entries >= self.spec.max_files {
            return self.omit(path, &self.spec.over_files_reason());
        }
        let room = self.spec.max_bytes - self.bytes;
        if !maybe_input && self.spec.contents && size > room {
            return self.omit(path, &self.spec.over_size_reason());
        }
        // O_NONBLOCK: even a FIFO swapped in could not block (none can be: all are dead).
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = match openat(dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => return self.omit(path, &format!("cannot open: {e}")),
        };
        let (mode, size) = match fstat(fd.as_fd()) {
            Ok(st)
                if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
                    == SFlag::S_IFREG =>
            {
                (st.st_mode & 0o777, st.st_size as u64)
            }
            _ => return self.omit(path, "changed type while being collected"),
        };
        let f = std::fs::File::from(fd);
        if maybe_input
            && self
                .inputs
                .iter()
                .any(|i| i.path == path && same_contents(&f, &i.contents, &mut self.buf))
        {
            return;
        }
        if self.entries >= self.spec.max_files {
            return self.omit(path, &self.spec.over_files_reason());
        }
        if !self.spec.contents {
            match self.report.send_large(&Msg::FileListed {
                path: path.into(),
                mode,
                size,
            }) {
                Ok(()) => self.entries += 1,
                Err(e) => self.broken = Some(e),
            }
            return;
        }
        if size > room {
            return self.omit(path, &self.spec.over_size_reason());
        }
        // Streamed: init holds one chunk of the file at a time, whatever its size (init is in
        // the sandbox's memory cgroup, beside the file's own tmpfs pages).
        match self.stream(&f, path, mode, size, room) {
            Ok(Some(sent)) => {
                self.entries += 1;
                self.bytes += sent;
            }
            Ok(None) => {}
            Err(e) => self.broken = Some(e),
        }
    }

    /// Sends the file's contents, at most `room` bytes: the number sent, or `None` when the
    /// file was ended with an omission instead. An error is the pipe's: cordon is gone.
    fn stream(
        &mut self,
        f: &std::fs::File,
        path: &str,
        mode: u32,
        size: u64,
        room: u64,
    ) -> Result<Option<u64>, Errno> {
        self.report.send_large(&Msg::FileStart {
            path: path.into(),
            mode,
            size,
        })?;
        let mut sent = 0u64;
        loop {
            let n = match read_full_at(f, &mut self.buf, sent) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    self.report.send_large(&Msg::FileOmitted {
                        path: path.into(),
                        reason: format!("cannot read: {e}"),
                    })?;
                    return Ok(None);
                }
            };
            if sent + n as u64 > room {
                self.report.send_large(&Msg::FileOmitted {
                    path: path.into(),
                    reason: self.spec.over_size_reason(),
                })?;
                return Ok(None);
            }
            self.report.send_chunk(&self.buf[..n])?;
            sent += n as u64;
        }
        self.report.send_large(&Msg::FileEnd { size: sent })?;
        Ok(Some(sent))
    }
}

/// Fills `buf` from `offset` on, short only at end-of-file.
fn read_full_at(f: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Whether the file holds exactly `contents`, compared a chunk at a time (a read error: no).
fn same_contents(f: &std::fs::File, contents: &[u8], buf: &mut [u8]) -> bool {
    let mut off = 0;
    loop {
        match read_full_at(f, buf, off as u64) {
            Ok(0) => return off == contents.len(),
            Ok(n) if contents.get(off..off + n) == Some(&buf[..n]) => off += n,
            _ => return false,
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

/// Walks /workspace and sends what it finds, then [`Msg::CollectDone`]. Runs in init after
/// [`kill_and_reap_all`].
pub fn collect(report: &Reporter, spec: &Collect, inputs: &[InputFile]) {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match nix::fcntl::open(WORKSPACE, flags, Mode::empty()) {
        Ok(root) => {
            if collect_in(&root, report, spec, inputs).is_err() {
                return;
            }
        }
        Err(e) => {
            let _ = report.send_large(&Msg::FileOmitted {
                path: ".".into(),
                reason: format!("cannot open /workspace: {e}"),
            });
        }
    }
    let _ = report.send_large(&Msg::CollectDone);
}

/// Walks the directory `root` (the workspace) and sends what it finds; an error is the
/// report pipe's (cordon is gone).
fn collect_in(
    root: &OwnedFd,
    report: &Reporter,
    spec: &Collect,
    inputs: &[InputFile],
) -> Result<(), Errno> {
    let mut w = Walk {
        spec,
        inputs,
        report,
        entries: 0,
        bytes: 0,
        omitted: 0,
        broken: None,
        buf: vec![0; FILE_CHUNK],
    };
    w.walk(root, "", 0);
    if let Some(e) = w.broken {
        return Err(e);
    }
    if w.omitted > MAX_OMITTED {
        report.send_large(&Msg::FilesUnlisted {
            count: (w.omitted - MAX_OMITTED) as u64,
        })?;
    }
    Ok(())
}

/// The files init sends, put together by cordon as they arrive: each file's bytes are decoded
/// chunk by chunk into one buffer (reserved from the size init announced, within the cap).
#[derive(Debug, Default)]
pub struct ReceivedFiles {
    pub files: Vec<OutputFile>,
    /// The directories that hold none of `files` and none of these (see
    /// [`Msg::DirListed`]), each relative to /workspace.
    pub directories: Vec<String>,
    pub omitted: Vec<OmittedFile>,
    /// init sent [`Msg::CollectDone`]: the collection was not cut short.
    pub done: bool,
    /// The first transfer that did not add up (a file's end disagreeing with what arrived,
    /// data outside a file, a file cut off by another): a file was lost in transit, which
    /// the result must say as it says a collection cut short.
    pub garbled: Option<String>,
    /// The file being received.
    open: Option<OutputFile>,
    /// The file being received was dropped (over a cap): its remaining data and its end are
    /// skipped, counting its bytes so far, which its end must confirm.
    discarding: Option<(String, u64)>,
    /// Bytes of the files received, and the cap they must fit (the spec's `max_bytes`,
    /// checked here too: what init sends is not trusted to respect it).
    bytes: u64,
    max_bytes: u64,
    /// The spec's `max_files`, checked here too (files and directories).
    max_files: usize,
    /// Why a file is left out over the file-count cap, and over the size cap (the spec's
    /// words: [`Collect::over_files_reason`]).
    over_files: String,
    over_size: String,
    /// The spec asked for a listing (names and sizes), not contents: a message of the other
    /// kind is a garbled transfer, never accepted (a listed file delivered to an output
    /// directory would be written empty).
    listing: bool,
    /// Omissions past [`RECEIVED_OMITTED_MAX`], and those init counted without listing them
    /// ([`Msg::FilesUnlisted`]).
    unlisted: u64,
}

/// The most "omitted" entries cordon keeps of what init sends (init lists at most
/// [`MAX_OMITTED`], plus a file's own read error or cap as it is sent); the rest are counted
/// ([`ReceivedFiles::unlisted`]), so that no sandbox can grow cordon's memory or its result
/// without bound.
pub(crate) const RECEIVED_OMITTED_MAX: usize = 4 * MAX_OMITTED;

impl ReceivedFiles {
    #[cfg(test)]
    pub fn new(max_bytes: u64, max_files: usize) -> Self {
        ReceivedFiles::for_spec(&Collect {
            max_bytes,
            max_files,
            ..Collect::default()
        })
    }

    /// What a [`Collect`] spec asks for.
    pub fn for_spec(c: &Collect) -> Self {
        ReceivedFiles {
            listing: !c.contents,
            max_bytes: c.max_bytes,
            max_files: c.max_files,
            over_files: c.over_files_reason(),
            over_size: c.over_size_reason(),
            ..ReceivedFiles::default()
        }
    }

    /// Takes a message about files; gives any other message back.
    pub fn take(&mut self, msg: Msg) -> Option<Msg> {
        if let Some((_, seen)) = self.discarding.as_mut() {
            match msg {
                Msg::FileBytes(b) => {
                    *seen += b.len() as u64;
                    return None;
                }
                Msg::FileEnd { size } => {
                    let (path, seen) = self.discarding.take().unwrap_or_default();
                    if seen != size {
                        // Not the end of the file dropped: something was lost between.
                        let why =
                            format!("garbled transfer: {seen} bytes arrived of the {size} sent");
                        self.garble(path, why);
                    }
                    return None;
                }
                _ => self.discarding = None,
            }
        }
        match msg {
            Msg::FileStart { path, .. }
            | Msg::FileListed { path, .. }
            | Msg::DirListed { path }
                if check_relative_path(&path).is_err() =>
            {
                self.drop_open("garbled transfer: cut off by the next file");
                self.garble(
                    path,
                    "garbled transfer: not a file name cordon accepts".into(),
                );
            }
            Msg::FileStart { path, .. } if self.listing => {
                self.drop_open("garbled transfer: cut off by the next file");
                self.garble(
                    path,
                    "garbled transfer: contents sent where a listing was asked for".into(),
                );
            }
            Msg::FileListed { path, .. } if !self.listing => {
                self.drop_open("garbled transfer: cut off by a listed file");
                self.garble(
                    path,
                    "garbled transfer: a listing sent where contents were asked for".into(),
                );
            }
            Msg::FileStart { path, mode, size } => {
                self.drop_open("garbled transfer: cut off by the next file");
                if self.full() {
                    self.omit(path.clone(), self.over_files.clone());
                    self.discarding = Some((path, 0));
                    return None;
                }
                let room = self.max_bytes.saturating_sub(self.bytes);
                self.open = Some(OutputFile {
                    path,
                    size: 0,
                    mode,
                    data: Vec::with_capacity(size.min(room) as usize),
                });
            }
            Msg::FileBytes(bytes) => {
                let Some(f) = self.open.as_mut() else {
                    self.garble(
                        ".".into(),
                        "garbled transfer: file data outside any file".into(),
                    );
                    return None;
                };
                if self.bytes + (f.data.len() + bytes.len()) as u64 > self.max_bytes {
                    let seen = (f.data.len() + bytes.len()) as u64;
                    let path = f.path.clone();
                    let why = self.over_size.clone();
                    self.drop_open(&why);
                    self.discarding = Some((path, seen));
                } else {
                    f.data.extend_from_slice(&bytes);
                }
            }
            Msg::FileEnd { size } => match self.open.take() {
                Some(mut f) if f.data.len() as u64 == size => {
                    f.size = size;
                    self.bytes += size;
                    self.files.push(f);
                }
                Some(f) => {
                    let why = format!(
                        "garbled transfer: {} bytes arrived of the {size} sent",
                        f.data.len()
                    );
                    self.garble(f.path, why);
                }
                None => self.garble(
                    ".".into(),
                    "garbled transfer: the end of a file never begun".into(),
                ),
            },
            Msg::FileListed { path, mode, size } => {
                self.drop_open("garbled transfer: cut off by a listed file");
                if self.full() {
                    self.omit(path, self.over_files.clone());
                } else {
                    self.files.push(OutputFile {
                        path,
                        size,
                        mode,
                        data: Vec::new(),
                    });
                }
            }
            Msg::FileOmitted { path, reason } => {
                if self.open.as_ref().is_some_and(|f| f.path == path) {
                    self.open = None;
                } else {
                    self.drop_open("garbled transfer: cut off by another file's omission");
                }
                self.omit(path, reason);
            }
            Msg::DirListed { path } => {
                self.drop_open("garbled transfer: cut off by a directory");
                if self.full() {
                    self.omit(path, self.over_files.clone());
                } else {
                    self.directories.push(path);
                }
            }
            Msg::NameOmitted { path, reason } => {
                self.drop_open("garbled transfer: cut off by another file's omission");
                self.omit_bytes(path, reason);
            }
            Msg::FilesUnlisted { count } => self.unlisted = self.unlisted.saturating_add(count),
            Msg::CollectDone => {
                self.drop_open("garbled transfer: the collection ended in the middle of it");
                self.done = true;
            }
            other => return Some(other),
        }
        None
    }

    /// Whether the file-count cap, which directories count toward too, is reached.
    fn full(&self) -> bool {
        self.files.len() + self.directories.len() >= self.max_files
    }

    /// The file being received when the messages stopped (init died mid-transfer), dropped.
    pub fn cut_off(&mut self) -> Option<String> {
        self.open.take().map(|f| f.path)
    }

    fn drop_open(&mut self, reason: &str) {
        if let Some(f) = self.open.take() {
            if reason.starts_with("garbled") {
                self.garble(f.path, reason.into());
            } else {
                self.omit(f.path, reason.into());
            }
        }
    }

    /// Lists an omission, or past [`RECEIVED_OMITTED_MAX`] counts it.
    fn omit(&mut self, path: String, reason: String) {
        self.omit_entry(path, None, reason);
    }

    /// [`Self::omit`] for a path given as bytes: one that is not UTF-8 is listed as its
    /// lossy text, with its exact bytes in base64 beside it (unless there are more of them
    /// than a path found in /workspace can have: then not from a walk, and not kept).
    fn omit_bytes(&mut self, path: Vec<u8>, reason: String) {
        use base64::Engine;
        match String::from_utf8(path) {
            Ok(path) => self.omit(path, reason),
            Err(e) => {
                let bytes = e.into_bytes();
                let exact = (bytes.len() <= MAX_PATH_LEN + 1 + MAX_NAME_LEN)
                    .then(|| base64::engine::general_purpose::STANDARD.encode(&bytes));
                let text = String::from_utf8_lossy(&bytes).into_owned();
                self.omit_entry(text, exact, reason);
            }
        }
    }

    fn omit_entry(&mut self, mut path: String, path_base64: Option<String>, mut reason: String) {
        // What init sends is not trusted to be short: a line may be up to a MiB.
        for (text, max) in [(&mut path, MAX_PATH_LEN), (&mut reason, 512)] {
            if text.len() > max {
                let mut cut = max;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push_str("...");
            }
        }
        if self.omitted.len() < RECEIVED_OMITTED_MAX {
            return self.omitted.push(OmittedFile {
                path,
                path_base64,
                reason,
            });
        }
        self.unlisted = self.unlisted.saturating_add(1);
    }

    /// How many entries were left behind beyond those in `omitted` (a count, not a list: a
    /// made-up entry such as `...` could be a file's real name).
    pub fn unlisted(&self) -> u64 {
        self.unlisted
    }

    /// Lists `path` as lost in transit, and keeps the first such reason for the result.
    fn garble(&mut self, path: String, reason: String) {
        if self.garbled.is_none() {
            self.garbled = Some(format!("{path}: {reason}"));
        }
        self.omit(path, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::channel::MsgReader;

    fn start(path: &str, size: u64) -> Msg {
        Msg::FileStart {
            path: path.into(),
            mode: 0o640,
            size,
        }
    }

    /// Files arrive whole; an omission ends the file begun (its bytes dropped); a file whose
    /// end disagrees with what arrived, or that would pass the cap, is dropped and listed.
    #[test]
    fn received_files_are_put_together_and_checked() {
        let mut r = ReceivedFiles::new(10, 1000);
        let msgs = vec![
            Msg::Exited { code: 0 },
            start("a", 5),
            Msg::FileBytes(b"hel".to_vec()),
            Msg::FileBytes(b"lo".to_vec()),
            Msg::FileEnd { size: 5 },
            start("b", 3),
            Msg::FileBytes(b"xy".to_vec()),
            Msg::FileOmitted {
                path: "b".into(),
                reason: "cannot read: EIO".into(),
            },
            start("c", 2),
            Msg::FileBytes(b"zz".to_vec()),
            Msg::FileEnd { size: 3 },
            start("d", 9),
            Msg::FileBytes(b"123456".to_vec()),
            // The rest of a file dropped over the cap, and its end, are skipped quietly.
            Msg::FileBytes(b"789".to_vec()),
            Msg::FileEnd { size: 9 },
        ];
        let others: Vec<Msg> = msgs.into_iter().filter_map(|m| r.take(m)).collect();
        assert_eq!(others, vec![Msg::Exited { code: 0 }]);
        assert_eq!(r.files.len(), 1, "{:?}", r.files);
        assert_eq!(
            (r.files[0].path.as_str(), r.files[0].size, r.files[0].mode),
            ("a", 5, 0o640)
        );
        assert_eq!(r.files[0].data, b"hello");
        let omitted: Vec<(&str, &str)> = r
            .omitted
            .iter()
            .map(|o| (o.path.as_str(), o.reason.as_str()))
            .collect();
        assert_eq!(omitted[0], ("b", "cannot read: EIO"));
        assert_eq!(omitted[1].0, "c");
        assert!(
            omitted[1].1.contains("2 bytes arrived of the 3"),
            "{omitted:?}"
        );
        assert_eq!(
            omitted[2],
            (
                "d",
                "over the 10-byte total-size cap (--collect-size / config.collectSize raise it)"
            )
        );
        assert_eq!(omitted.len(), 3, "{omitted:?}");
        // An end that does not match what arrived of a dropped file: something between was
        // lost, which is garbling too.
        let mut d = ReceivedFiles::new(4, 1000);
        d.take(start("x", 9));
        d.take(Msg::FileBytes(b"123456".to_vec()));
        d.take(Msg::FileBytes(b"7".to_vec()));
        d.take(Msg::FileEnd { size: 7 });
        assert!(d.garbled.is_none(), "{:?}", d.garbled);
        d.take(start("y", 9));
        d.take(Msg::FileBytes(b"123456".to_vec()));
        d.take(Msg::FileEnd { size: 9 });
        assert!(
            d.garbled
                .as_deref()
                .is_some_and(|g| g.starts_with("y: garbled")),
            "{:?}",
            d.garbled
        );
        // The size mismatch is a file lost in transit, which the result reports; a file
        // over the cap is an ordinary omission.
        let garbled = r.garbled.clone().expect("the mismatch of \"c\" is kept");
        assert!(garbled.starts_with("c: garbled"), "{garbled}");
        // Data outside any file after the skipped end is garbling again, but the first
        // reason is the one kept.
        r.take(Msg::FileBytes(b"!".to_vec()));
        assert_eq!(r.omitted.len(), 4);
        assert_eq!(r.garbled.as_deref(), Some(garbled.as_str()));
        assert!(!r.done);
        // Cut short: the file begun is what was being sent.
        r.take(start("e", 1));
        assert_eq!(r.cut_off().as_deref(), Some("e"));
        assert!(!r.done);
        r.take(Msg::CollectDone);
        assert!(r.done);
    }

    /// What init sends is held to the spec's caps by cordon too: files past `max_files` are
    /// omitted (their data skipped), and omissions past the list's cap are counted in one
    /// entry, so a flood of messages cannot grow cordon's memory.
    #[test]
    fn received_files_are_held_to_the_caps() {
        let mut r = ReceivedFiles::new(1 << 20, 2);
        for name in ["a", "b", "c"] {
            r.take(start(name, 1));
            r.take(Msg::FileBytes(b"x".to_vec()));
            assert!(r.take(Msg::FileEnd { size: 1 }).is_none());
        }
        let names: Vec<&str> = r.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(r.omitted.len(), 1);
        assert_eq!(
            (r.omitted[0].path.as_str(), r.omitted[0].reason.as_str()),
            (
                "c",
                "over the 2-file cap (--collect-files / config.collectFiles raise it)"
            )
        );
        assert!(r.garbled.is_none(), "{:?}", r.garbled);
        for i in 0..RECEIVED_OMITTED_MAX + 50 {
            r.take(Msg::FileOmitted {
                path: format!("f{i}"),
                reason: "over the file-count cap".into(),
            });
        }
        // Past the list's length they are counted, with no made-up entry (a file may be
        // named `...`); init's own count of what it did not send adds to it.
        assert_eq!(r.omitted.len(), RECEIVED_OMITTED_MAX);
        assert!(
            r.omitted
                .iter()
                .all(|f| f.path.starts_with('f') || f.path == "c")
        );
        assert_eq!(r.unlisted(), 51);
        assert!(r.take(Msg::FilesUnlisted { count: 9 }).is_none());
        assert_eq!(r.unlisted(), 60);
    }

    /// A listing (no contents) gives names, sizes and modes, held to the file-count cap only:
    /// a listed file's size is not data cordon receives.
    #[test]
    fn listed_files_are_held_to_the_count_cap_only() {
        let spec = Collect {
            max_bytes: 10,
            max_files: 2,
            only: None,
            contents: false,
        };
        let mut r = ReceivedFiles::for_spec(&spec);
        for (name, size) in [("big", 1u64 << 30), ("small", 3), ("third", 1)] {
            let m = Msg::FileListed {
                path: name.into(),
                mode: 0o644,
                size,
            };
            assert!(r.take(m).is_none());
        }
        let got: Vec<(&str, u64, usize)> = r
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.size, f.data.len()))
            .collect();
        assert_eq!(got, [("big", 1 << 30, 0), ("small", 3, 0)]);
        assert_eq!(r.omitted.len(), 1);
        assert_eq!(
            r.omitted[0].reason,
            "over the 2-file cap (--collect-files / config.collectFiles raise it)"
        );
        assert!(r.garbled.is_none(), "{:?}", r.garbled);
        // The other kind of message is refused either way.
        r.take(start("x", 1));
        assert!(
            r.garbled.is_some(),
            "contents where a listing was asked for"
        );
        let mut c = ReceivedFiles::for_spec(&Collect::default());
        c.take(Msg::FileListed {
            path: "y".into(),
            mode: 0o644,
            size: 1,
        });
        assert!(
            c.garbled.is_some(),
            "a listing where contents were asked for"
        );
        assert!(c.files.is_empty());
    }

    /// Walks `root` as init walks /workspace, and gives what cordon makes of what it sends.
    fn walk_received(
        root: &std::path::Path,
        spec: &Collect,
        inputs: &[InputFile],
    ) -> ReceivedFiles {
        let (rd, wr) = nix::unistd::pipe().unwrap();
        let reader = receive(rd, ReceivedFiles::for_spec(spec));
        let report = Reporter::new(wr);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let dir = nix::fcntl::open(root, flags, Mode::empty()).unwrap();
        collect_in(&dir, &report, spec, inputs).unwrap();
        report.send_large(&Msg::CollectDone).unwrap();
        drop(report);
        reader.join().unwrap().0
    }

    /// What cordon makes of the messages read from `rd` (into `got`), on a thread, with how
    /// many file pieces came.
    fn receive(
        rd: OwnedFd,
        mut got: ReceivedFiles,
    ) -> std::thread::JoinHandle<(ReceivedFiles, usize)> {
        std::thread::spawn(move || {
            let mut r = MsgReader::default();
            let mut chunks = 0;
            let mut b = vec![0u8; 4096];
            loop {
                match nix::unistd::read(&rd, &mut b).unwrap() {
                    0 => break,
                    n => {
                        for m in r.feed(&b[..n]) {
                            chunks += usize::from(matches!(m, Msg::FileBytes(_)));
                            assert!(got.take(m).is_none());
                        }
                    }
                }
            }
            (got, chunks)
        })
    }

    fn b64(bytes: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A name that is not UTF-8 (a file's, or a directory's: then nothing in it is walked)
    /// is omitted as its path's lossy text and, in `pathBase64`, its exact bytes, the
    /// directories above it included.
    #[test]
    fn a_name_that_is_not_utf8_is_omitted_with_its_exact_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        let p = |b: &[u8]| d.path().join(std::ffi::OsStr::from_bytes(b));
        std::fs::create_dir(p(b"ok")).unwrap();
        std::fs::write(p(b"ok/bad\xffname"), b"x").unwrap();
        std::fs::write(p(b"ok/kept.txt"), b"k").unwrap();
        std::fs::create_dir(p(b"dir\xfe")).unwrap();
        std::fs::write(p(b"dir\xfe/inside.txt"), b"y").unwrap();
        for contents in [false, true] {
            let spec = Collect {
                contents,
                ..Collect::default()
            };
            let got = walk_received(d.path(), &spec, &[]);
            assert!(got.done && got.garbled.is_none(), "{got:?}");
            let files: Vec<&str> = got.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(files, ["ok/kept.txt"]);
            let omitted: Vec<(&str, Option<&str>, &str)> = got
                .omitted
                .iter()
                .map(|o| (o.path.as_str(), o.path_base64.as_deref(), o.reason.as_str()))
                .collect();
            assert_eq!(
                omitted,
                [
                    (
                        "dir\u{fffd}",
                        Some(b64(b"dir\xfe").as_str()),
                        "directory name is not valid UTF-8 (nothing in it was collected)"
                    ),
                    (
                        "ok/bad\u{fffd}name",
                        Some(b64(b"ok/bad\xffname").as_str()),
                        "name is not valid UTF-8"
                    ),
                ]
            );
            // In the result, `pathBase64` is beside `path` for such a name only.
            let json = serde_json::to_value(&got.omitted).unwrap();
            assert_eq!(json[1]["pathBase64"], b64(b"ok/bad\xffname"));
            let plain = serde_json::to_value(OmittedFile::new("a".into(), "why".into())).unwrap();
            assert_eq!(plain, serde_json::json!({"path": "a", "reason": "why"}));
        }
    }

    /// A directory that holds nothing collected (empty, or whose entries were all left out)
    /// is reported, once, at its deepest; one that cordon made for an input file is not; a
    /// symlink to a directory is neither followed nor reported as one. Directories count
    /// toward the file-count cap as files do, on both sides.
    #[test]
    fn directories_that_hold_nothing_collected_are_reported() {
        let d = tempfile::tempdir().unwrap();
        let p = |rel: &str| d.path().join(rel);
        for dir in ["empty/sub", "full", "in/new", "inonly", "links"] {
            std::fs::create_dir_all(p(dir)).unwrap();
        }
        std::fs::write(p("full/a.txt"), b"a").unwrap();
        std::fs::write(p("in/x"), b"input").unwrap();
        std::fs::write(p("inonly/f"), b"input").unwrap();
        std::os::unix::fs::symlink("/etc", p("links/l")).unwrap();
        std::os::unix::fs::symlink("/", p("dirlink")).unwrap();
        let input = |path: &str| InputFile {
            path: path.into(),
            contents: b"input".to_vec(),
            mode: 0o644,
        };
        let inputs = [input("in/x"), input("inonly/f")];
        for contents in [false, true] {
            let spec = Collect {
                contents,
                ..Collect::default()
            };
            let got = walk_received(d.path(), &spec, &inputs);
            assert!(got.done && got.garbled.is_none(), "{got:?}");
            let files: Vec<&str> = got.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(files, ["full/a.txt"]);
            assert_eq!(got.directories, ["empty/sub", "in/new", "links"]);
            let omitted: Vec<&str> = got.omitted.iter().map(|o| o.path.as_str()).collect();
            assert_eq!(omitted, ["dirlink", "links/l"]);
        }
        // Over the cap: a directory is left out as a file is, with the same reason.
        let spec = Collect {
            max_files: 2,
            ..Collect::default()
        };
        let got = walk_received(d.path(), &spec, &inputs);
        assert_eq!(got.directories, ["empty/sub"]);
        assert_eq!(got.files.len(), 1);
        let over: Vec<(&str, &str)> = got
            .omitted
            .iter()
            .map(|o| (o.path.as_str(), o.reason.as_str()))
            .filter(|(_, why)| why.starts_with("over the 2-file cap"))
            .collect();
        assert_eq!(over.len(), 2, "{:?}", got.omitted);
        assert_eq!((over[0].0, over[1].0), ("in/new", "links"));
        // A collection of chosen paths (a compile's artifact) reports no directory.
        let spec = Collect {
            only: Some(vec!["full/a.txt".into(), "empty/sub/x".into()]),
            ..Collect::default()
        };
        let got = walk_received(d.path(), &spec, &[]);
        assert_eq!(got.files.len(), 1);
        assert!(got.directories.is_empty(), "{:?}", got.directories);

        // cordon holds what init sends to the cap too, and to the names it accepts.
        let mut r = ReceivedFiles::new(1 << 20, 2);
        r.take(start("f", 1));
        r.take(Msg::FileBytes(b"x".to_vec()));
        r.take(Msg::FileEnd { size: 1 });
        for path in ["d1", "d2"] {
            assert!(r.take(Msg::DirListed { path: path.into() }).is_none());
        }
        assert_eq!(r.directories, ["d1"]);
        assert_eq!(r.omitted[0].path, "d2");
        assert!(r.omitted[0].reason.starts_with("over the 2-file cap"));
        r.take(Msg::DirListed {
            path: "../up".into(),
        });
        assert!(r.garbled.as_deref().is_some_and(|g| g.starts_with("../up")));
        assert_eq!(r.directories, ["d1"]);
    }

    /// cordon's side of a name given as bytes: base64 only for one that is not UTF-8, and
    /// only for as many bytes as a path of a walk can have.
    #[test]
    fn names_given_as_bytes_are_checked_by_cordon() {
        let mut r = ReceivedFiles::new(1 << 20, 10);
        let huge = [b'\xff'; MAX_PATH_LEN + 2 + MAX_NAME_LEN];
        for path in [b"plain".to_vec(), b"a/\xc3".to_vec(), huge.to_vec()] {
            r.take(Msg::NameOmitted {
                path,
                reason: "name is not valid UTF-8".into(),
            });
        }
        let got: Vec<(&str, Option<&str>)> = r
            .omitted
            .iter()
            .map(|o| (o.path.as_str(), o.path_base64.as_deref()))
            .collect();
        assert_eq!(got[0], ("plain", None));
        assert_eq!(got[1], ("a/\u{fffd}", Some(b64(b"a/\xc3").as_str())));
        assert!(
            got[2].1.is_none() && got[2].0.ends_with("..."),
            "{:?}",
            got[2]
        );
        assert!(got[2].0.len() <= MAX_PATH_LEN + 3);
        assert!(r.garbled.is_none());
    }

    /// init's side: a file several chunks long goes through the pipe in pieces and arrives
    /// whole; a file the same as an input file is recognised, a different one is not.
    #[test]
    fn a_file_is_streamed_in_chunks() {
        let data: Vec<u8> = (0..FILE_CHUNK * 3 + 17).map(|i| (i % 253) as u8).collect();
        let mut tmp = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut tmp, &data).unwrap();
        let mut buf = vec![0; FILE_CHUNK];
        assert!(same_contents(&tmp, &data, &mut buf));
        assert!(!same_contents(&tmp, &data[1..], &mut buf));
        let mut other = data.clone();
        *other.last_mut().unwrap() ^= 1;
        assert!(!same_contents(&tmp, &other, &mut buf));

        let (rd, wr) = nix::unistd::pipe().unwrap();
        let reader = receive(rd, ReceivedFiles::new(1 << 30, 1000));
        let report = Reporter::new(wr);
        let spec = Collect::default();
        let mut w = Walk {
            spec: &spec,
            inputs: &[],
            report: &report,
            entries: 0,
            bytes: 0,
            omitted: 0,
            broken: None,
            buf,
        };
        let sent = w
            .stream(&tmp, "out/f.bin", 0o600, data.len() as u64, 1 << 30)
            .unwrap();
        assert_eq!(sent, Some(data.len() as u64));
        // Over the room left: ended with an omission, not a file.
        let cut = w.stream(&tmp, "g", 0o600, 0, 100).unwrap();
        assert_eq!(cut, None);
        drop(report);
        let (got, chunks) = reader.join().unwrap();
        assert_eq!(
            chunks, 4,
            "3 full chunks and a short one; none of g, whose first chunk is over its room"
        );
        assert_eq!(got.files.len(), 1);
        assert_eq!(got.files[0].path, "out/f.bin");
        assert_eq!(got.files[0].size, data.len() as u64);
        assert!(got.files[0].data == data, "the contents differ");
        assert_eq!(got.omitted.len(), 1);
        assert_eq!(
            (got.omitted[0].path.as_str(), got.omitted[0].reason.as_str()),
            (
                "g",
                "over the 64 MiB total-size cap (--collect-size / config.collectSize raise it)"
            )
        );
    }
}

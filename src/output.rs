//! Writing collected files into the caller's `--output-dir`, on the host.
//!
//! The names come from the sandbox (already checked by [`check_relative_path`] on both
//! sides), the directory is the caller's. Every step is relative to a directory fd opened with
//! `O_NOFOLLOW`: a symlink planted in the output directory (by anyone) is never followed, and
//! files are written with plain permission bits (no setuid, owned by the caller).

use crate::outcome::OutputFile;
use crate::spec::check_relative_path;
use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, mkdirat};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot {step} {path}: {errno}; {hint}")]
    Io {
        step: &'static str,
        path: PathBuf,
        errno: Errno,
        hint: &'static str,
    },
    #[error("refusing to write {0}: {1}")]
    BadName(String, String),
    #[error("refusing to write into {path}: {why}")]
    Refused { path: PathBuf, why: String },
    #[error("{first} (and {more} more file(s) not written)")]
    Several {
        first: Box<OutputError>,
        more: usize,
    },
}

const HINT: &str =
    "check that --output-dir is a writable directory (symlinks inside it are not followed)";

/// A request's `outputDir` below `--output-root` that cannot be created there.
const UNDER_ROOT_DENIED: &str =
    "the operator's --output-root must be a directory cordon's caller can write";

fn io(step: &'static str, path: &Path) -> impl Fn(Errno) -> OutputError {
    let path = path.to_path_buf();
    move |errno| OutputError::Io {
        step,
        path: path.clone(),
        errno,
        hint: HINT,
    }
}

/// Whether a directory on the way to (or inside) the output directory can be trusted not to
/// be swapped under cordon: owned by root or by the caller, and not writable by others
/// (unless sticky: then only an entry's owner may rename it). For a root caller, not writable
/// by a group other than root's either. Anyone else who could rename entries there could
/// send the program's files into a directory of their choosing, as the caller.
fn check_trusted(fd: &OwnedFd, shown: &Path) -> Result<(), OutputError> {
    let st = nix::sys::stat::fstat(fd).map_err(io("inspect", shown))?;
    let euid = nix::unistd::geteuid().as_raw();
    let sticky = st.st_mode & libc::S_ISVTX != 0;
    let why = if st.st_uid != 0 && st.st_uid != euid {
        Some(format!(
            "it belongs to uid {}, neither to the caller nor to root",
            st.st_uid
        ))
    } else if st.st_mode & 0o002 != 0 && !sticky {
        Some("anyone may rename entries in it (writable by all, not sticky)".to_string())
    } else if euid == 0 && st.st_mode & 0o020 != 0 && st.st_gid != 0 && !sticky {
        Some(format!(
            "members of group {} may rename entries in it",
            st.st_gid
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(OutputError::Refused {
            path: shown.into(),
            why: format!(
                "{why}, so they could redirect the program's files; give a directory on a path only you (or root) control"
            ),
        }),
        None => Ok(()),
    }
}

/// What to do when the directory above one that cordon creates refuses it (EACCES, EPERM,
/// EROFS): for `--output-dir` itself and the directories on its way.
const CANNOT_CREATE_OUTPUT_DIR: &str = "cordon creates a missing --output-dir, and the caller may not write in the directory above it: create it first, or give one under a directory you can write";

/// Opens (creating it if missing) the directory `name` in `parent`; `denied`: the hint for a
/// creation the directory above refuses.
fn open_dir_at(
    parent: &OwnedFd,
    name: &str,
    shown: &Path,
    denied: &'static str,
) -> Result<OwnedFd, OutputError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match mkdirat(parent, name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(errno @ (Errno::EACCES | Errno::EPERM | Errno::EROFS)) => {
            return Err(OutputError::Io {
                step: "create directory",
                path: shown.into(),
                errno,
                hint: denied,
            });
        }
        Err(errno) => return Err(io("create directory", shown)(errno)),
    }
    let fd = openat(parent, name, flags, Mode::empty()).map_err(|errno| match errno {
        // O_NOFOLLOW with O_DIRECTORY answers a symlink with either.
        Errno::ELOOP | Errno::ENOTDIR => OutputError::Refused {
            path: shown.into(),
            why: "it is not a directory (a symlink is not followed here)".into(),
        },
        e => io("open directory", shown)(e),
    })?;
    check_trusted(&fd, shown)?;
    Ok(fd)
}

/// The caller's `--output-dir`, opened (and created if missing) before the program runs, so
/// that a bad directory is reported before a long run rather than after it, and so that what
/// the directory's path names cannot change in between. Its last component must not be a
/// symlink (one planted there would send the program's files elsewhere).
pub struct OutputDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl OutputDir {
    /// A request's `outputDir` under the operator's `--output-root`: `rel` (plain names
    /// only) is made below `root` without following a symlink, and its last directory must
    /// be new, made here for this request: a request, whose author the operator does not
    /// trust, can then neither overwrite files already under the root (the operator's, or
    /// another request's) nor follow a symlink kept there out of it.
    pub fn open_new_under(root: &Path, rel: &Path) -> Result<OutputDir, OutputError> {
        use std::path::Component;
        let path = root.join(rel);
        let mut names = Vec::new();
        for c in rel.components() {
            match c.as_os_str().to_str() {
                _ if matches!(c, Component::CurDir) => {}
                Some(n) if matches!(c, Component::Normal(_)) => names.push(n),
                _ => {
                    return Err(OutputError::Refused {
                        path,
                        why: "a request's outputDir under --output-root must be plain UTF-8 names below it".into(),
                    });
                }
            }
        }
        let Some((last, above)) = names.split_last() else {
            return Err(OutputError::Refused {
                path,
                why: "it is --output-root itself; a request's outputDir must name a new directory below it".into(),
            });
        };
        let mut fd = OutputDir::open(root)?.fd;
        let mut shown = root.to_path_buf();
        let below_root = |e: OutputError| match e {
            OutputError::Refused { path, why } => OutputError::Refused {
                path,
                why: format!(
                    "{why}; below --output-root a request's outputDir never follows a symlink"
                ),
            },
            e => e,
        };
        for n in above {
            shown.push(n);
            fd = open_dir_at(&fd, n, &shown, UNDER_ROOT_DENIED).map_err(below_root)?;
        }
        shown.push(last);
        match mkdirat(&fd, *last, Mode::from_bits_truncate(0o755)) {
            Ok(()) => {}
            Err(Errno::EEXIST) => {
                return Err(OutputError::Refused {
                    path: shown,
                    why: "it already exists; under --output-root each request's outputDir must be a new directory, so that no request overwrites files already there (another request's, or yours)".into(),
                });
            }
            Err(errno) => return Err(io("create directory", &shown)(errno)),
        }
        let fd = open_dir_at(&fd, last, &shown, UNDER_ROOT_DENIED).map_err(below_root)?;
        Ok(OutputDir { fd, path })
    }

    pub fn open(dir: &Path) -> Result<OutputDir, OutputError> {
        use std::collections::VecDeque;
        use std::ffi::OsString;
        use std::path::Component;
        // Rebuilt from its components: a trailing slash (`/tmp/out/`) would make the lstat
        // below follow a symlink in the last place.
        let dir = &dir.components().collect::<PathBuf>();
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_symlink()) {
            return Err(OutputError::Refused {
                path: dir.into(),
                why: "it is a symlink; give the directory it points to".into(),
            });
        }
        let abs = std::path::absolute(dir).map_err(|e| {
            io("resolve", dir)(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
        })?;
        // Walked from `/` one name at a time, never letting the kernel follow a symlink:
        // each directory passed through is checked (see check_trusted), a symlink is followed
        // here only once the directory holding it passed, and what is missing is made one
        // level at a time. So nobody but the caller and root can steer where the files go.
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let root = || -> Result<OwnedFd, OutputError> {
            let fd = open("/", flags, Mode::empty()).map_err(io("open", Path::new("/")))?;
            check_trusted(&fd, Path::new("/"))?;
            Ok(fd)
        };
        let names = |p: &Path| -> VecDeque<OsString> {
            p.components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_owned()),
                    Component::ParentDir => Some("..".into()),
                    _ => None,
                })
                .collect()
        };
        let mut queue = names(&abs);
        let mut fd = root()?;
        let mut shown = PathBuf::from("/");
        let mut hops = 0;
        while let Some(name) = queue.pop_front() {
            if name == ".." {
                shown.pop();
                fd = openat(&fd, "..", flags, Mode::empty()).map_err(io("open", &shown))?;
                check_trusted(&fd, &shown)?;
                continue;
            }
            shown.push(&name);
            let Some(n) = name.to_str() else {
                return Err(OutputError::Refused {
                    path: shown,
                    why: "its name is not UTF-8".into(),
                });
            };
            match nix::sys::stat::fstatat(&fd, n, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                Err(Errno::ENOENT) => fd = open_dir_at(&fd, n, &shown, CANNOT_CREATE_OUTPUT_DIR)?,
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                    // The directory holding it passed check_trusted, but a sticky one (/tmp)
                    // lets anyone add entries: a symlink another user planted there (before
                    // cordon looked, or as the name it was about to create) would choose
                    // where the files go. Only the caller's and root's are followed, as the
                    // kernel's fs.protected_symlinks would have it.
                    let euid = nix::unistd::geteuid().as_raw();
                    if st.st_uid != euid && st.st_uid != 0 {
                        return Err(OutputError::Refused {
                            path: shown,
                            why: format!(
                                "it is a symlink of uid {}, neither the caller's nor root's, so that user chooses where the program's files go; give a path without it",
                                st.st_uid
                            ),
                        });
                    }
                    hops += 1;
                    if hops > 40 {
                        return Err(io("resolve", dir)(Errno::ELOOP));
                    }
                    let target = nix::fcntl::readlinkat(&fd, n).map_err(io("read", &shown))?;
                    let target = PathBuf::from(target);
                    shown.pop();
                    if target.is_absolute() {
                        fd = root()?;
                        shown = PathBuf::from("/");
                    }
                    for t in names(&target).into_iter().rev() {
                        queue.push_front(t);
                    }
                }
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                    fd = openat(&fd, n, flags, Mode::empty()).map_err(io("open", &shown))?;
                    check_trusted(&fd, &shown)?;
                }
                Ok(_) => {
                    return Err(OutputError::Refused {
                        path: shown,
                        why: "it is not a directory".into(),
                    });
                }
                Err(errno) => return Err(io("inspect", &shown)(errno)),
            }
        }
        // Checked now, before anything runs: a program whose files cannot be written would
        // otherwise run, with its effects, for nothing. An answer that is no answer (EPERM
        // or ENOSYS from a caller's seccomp filter that does not know faccessat2) is passed
        // over: the delivery still reports a write that fails.
        if let Err(errno) = nix::unistd::faccessat(
            &fd,
            ".",
            nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
            nix::fcntl::AtFlags::AT_EACCESS,
        ) && !matches!(errno, Errno::EPERM | Errno::ENOSYS)
        {
            let why = match nix::sys::stat::fstat(&fd) {
                Ok(st) if errno == Errno::EACCES => format!(
                    "cordon cannot write into it ({errno}: mode {:o}, owner uid {}); give a directory you can write, or fix its permissions",
                    st.st_mode & 0o7777,
                    st.st_uid
                ),
                _ => {
                    format!("cordon cannot write into it ({errno}); give a directory you can write")
                }
            };
            return Err(OutputError::Refused { path: shown, why });
        }
        Ok(OutputDir {
            fd,
            path: dir.to_path_buf(),
        })
    }

    /// Writes the run's collected files here, and makes its directories (see
    /// [`Self::make_each`]). A failure to write them is reported with the
    /// result; a run that had succeeded is then no success (status `sandbox_error`, exit 125),
    /// as a collection cut short is not, so that neither a script nor an agent reading
    /// `success` takes the files for delivered. A failed run keeps its own status. A file not
    /// written leaves `files` (a directory not made, `directories`) for `filesOmitted`, with
    /// the reason: a client that opens what `files` lists finds it there.
    pub fn deliver(&self, out: &mut crate::outcome::Outcome) {
        let mut failed = self.write_each(out.files.as_deref().unwrap_or_default());
        failed.extend(self.make_each(&out.directories));
        let names: std::collections::HashSet<&str> =
            failed.iter().map(|(path, _)| path.as_str()).collect();
        // A name is a file's or a directory's, not both (the sandbox's walk lists each once).
        out.directories.retain(|d| !names.contains(d.as_str()));
        if let Some(files) = out.files.as_mut() {
            files.retain(|f| !names.contains(f.path.as_str()));
        }
        for (path, e) in &failed {
            // Listed up to the collection's own bound, counted past it.
            if out.files_omitted.len() < crate::launch::RECEIVED_OMITTED_MAX {
                out.files_omitted.push(crate::outcome::OmittedFile::new(
                    path.clone(),
                    format!("not written to --output-dir: {e}"),
                ));
            } else {
                out.files_omitted_unlisted += 1;
            }
        }
        if let Err(e) = several(failed.into_iter().map(|(_, e)| e).collect()) {
            let note = format!("cordon could not write the program's files to --output-dir: {e}");
            out.message = Some(match out.message.take() {
                Some(m) => format!("{m}; {note}"),
                None => note,
            });
            if out.success {
                out.success = false;
                out.status = crate::outcome::Status::SandboxError;
            }
            if out.cli_exit_code == 0 {
                out.cli_exit_code = crate::outcome::exit_codes::SANDBOX_ERROR;
            }
        }
    }

    /// Writes `files` here. A regular file already under a name is replaced: unlinked, then
    /// created anew (`O_EXCL`), so a hard link there is never written through and the file
    /// is the caller's own; any other entry under the name (a symlink, a FIFO, a directory)
    /// is an error, never followed or opened.
    pub fn write_all(&self, files: &[OutputFile]) -> Result<(), OutputError> {
        several(self.write_each(files).into_iter().map(|(_, e)| e).collect())
    }

    /// Makes each of `dirs` (relative paths, with the directories above them) here, as
    /// `mkdir -p` would, one level at a time without following a symlink: a directory
    /// already there is kept, anything else under a name (a symlink, a file) is an error.
    /// The paths of those not made, with why.
    fn make_each(&self, dirs: &[String]) -> Vec<(String, OutputError)> {
        dirs.iter()
            .filter_map(|d| self.make_dir(d).err().map(|e| (d.clone(), e)))
            .collect()
    }

    fn make_dir(&self, path: &str) -> Result<(), OutputError> {
        check_relative_path(path).map_err(|e| OutputError::BadName(path.into(), e.hint))?;
        let parts: Vec<&str> = path.split('/').collect();
        self.open_dirs(&parts).map(drop)
    }

    /// Opens (making them as needed) the directories `parts` here, one level at a time
    /// without following a symlink: the last one, None for no parts; and the path shown in
    /// errors, here joined with `parts`.
    fn open_dirs(&self, parts: &[&str]) -> Result<(Option<OwnedFd>, PathBuf), OutputError> {
        let mut cur: Option<OwnedFd> = None;
        let mut shown = self.path.clone();
        for p in parts {
            shown.push(p);
            let next = open_dir_at(cur.as_ref().unwrap_or(&self.fd), p, &shown, HINT)?;
            cur = Some(next);
        }
        Ok((cur, shown))
    }

    /// Writes each of `files` (one that cannot be written does not cost the others); the
    /// names of those not written, with why.
    fn write_each(&self, files: &[OutputFile]) -> Vec<(String, OutputError)> {
        files
            .iter()
            .filter_map(|f| self.write_one(f).err().map(|e| (f.path.clone(), e)))
            .collect()
    }

    fn write_one(&self, f: &OutputFile) -> Result<(), OutputError> {
        check_relative_path(&f.path).map_err(|e| OutputError::BadName(f.path.clone(), e.hint))?;
        if f.data.len() as u64 != f.size {
            // A listing (names and sizes) is never delivered: that would write empty files.
            return Err(OutputError::BadName(
                f.path.clone(),
                format!("{} bytes arrived of its {}", f.data.len(), f.size),
            ));
        }
        let parts: Vec<&str> = f.path.split('/').collect();
        let (name, parents) = parts.split_last().expect("a checked path has a component");
        let (cur, mut shown) = self.open_dirs(parents)?;
        shown.push(name);
        let parent = cur.as_ref().unwrap_or(&self.fd);
        match nix::sys::stat::fstatat(parent, *name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => {}
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {
                nix::unistd::unlinkat(parent, *name, nix::unistd::UnlinkatFlags::NoRemoveDir)
                    .or_else(|e| if e == Errno::ENOENT { Ok(()) } else { Err(e) })
                    .map_err(io("replace", &shown))?;
            }
            Ok(_) => {
                return Err(OutputError::Refused {
                    path: shown,
                    why: "something other than a regular file (a symlink, FIFO, directory...) is there under that name; cordon neither follows nor replaces it".into(),
                });
            }
            Err(errno) => return Err(io("inspect", &shown)(errno)),
        }
        let mode = Mode::from_bits_truncate(if f.mode & 0o111 != 0 { 0o755 } else { 0o644 });
        let wflags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(parent, *name, wflags, mode).map_err(io("create", &shown))?;
        let mut file = std::fs::File::from(fd);
        std::io::Write::write_all(&mut file, &f.data).map_err(|e| {
            io("write", &shown)(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
        })
    }
}

/// The first of `failed`, and how many more.
fn several(mut failed: Vec<OutputError>) -> Result<(), OutputError> {
    match failed.len() {
        0 => Ok(()),
        1 => Err(failed.remove(0)),
        n => Err(OutputError::Several {
            first: Box::new(failed.remove(0)),
            more: n - 1,
        }),
    }
}

/// Opens `dir` and writes `files` into it (see [`OutputDir`]).
pub fn write_all(dir: &Path, files: &[OutputFile]) -> Result<(), OutputError> {
    OutputDir::open(dir)?.write_all(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, data: &[u8]) -> OutputFile {
        OutputFile {
            path: path.into(),
            size: data.len() as u64,
            mode: 0o644,
            data: data.to_vec(),
        }
    }

    #[test]
    fn writes_nested_files() {
        let d = tempfile::tempdir().unwrap();
        write_all(
            d.path(),
            &[file("a.txt", b"A"), file("sub/dir/b.bin", b"BB")],
        )
        .unwrap();
        assert_eq!(std::fs::read(d.path().join("a.txt")).unwrap(), b"A");
        assert_eq!(
            std::fs::read(d.path().join("sub/dir/b.bin")).unwrap(),
            b"BB"
        );
    }

    #[test]
    fn never_follows_a_symlink_in_the_output_dir() {
        let d = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(target.path().join("victim"), d.path().join("out.txt")).unwrap();
        std::os::unix::fs::symlink(target.path(), d.path().join("sub")).unwrap();
        assert!(write_all(d.path(), &[file("out.txt", b"x")]).is_err());
        assert!(write_all(d.path(), &[file("sub/y.txt", b"y")]).is_err());
        assert!(!target.path().join("victim").exists());
        assert!(!target.path().join("y.txt").exists());
    }

    #[test]
    fn replaces_a_regular_file_without_writing_through_its_links() {
        let d = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let victim = elsewhere.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::fs::hard_link(&victim, d.path().join("out.txt")).unwrap();
        std::fs::write(d.path().join("old.txt"), b"old").unwrap();
        write_all(
            d.path(),
            &[file("out.txt", b"new"), file("old.txt", b"newer")],
        )
        .unwrap();
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"precious",
            "a hard link was written through"
        );
        assert_eq!(std::fs::read(d.path().join("out.txt")).unwrap(), b"new");
        assert_eq!(std::fs::read(d.path().join("old.txt")).unwrap(), b"newer");
    }

    #[test]
    fn a_fifo_under_a_name_is_refused_not_opened() {
        let d = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&d.path().join("pipe"), Mode::from_bits_truncate(0o644)).unwrap();
        // Opening the FIFO for writing would block forever: the error must come at once.
        let e = write_all(d.path(), &[file("pipe", b"x")]).unwrap_err();
        assert!(matches!(e, OutputError::Refused { .. }), "{e}");
    }

    #[test]
    fn the_output_dir_itself_may_not_be_a_symlink_or_a_file() {
        let d = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        let link = d.path().join("out");
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        let e = OutputDir::open(&link)
            .err()
            .expect("a symlink must be refused");
        assert!(e.to_string().contains("symlink"), "{e}");
        let f = d.path().join("file");
        std::fs::write(&f, b"").unwrap();
        let e = OutputDir::open(&f).err().expect("a file must be refused");
        assert!(e.to_string().contains("not a directory"), "{e}");
        // A missing one is made, parents included.
        let fresh = d.path().join("a/b/c");
        OutputDir::open(&fresh).unwrap();
        assert!(fresh.is_dir());
    }

    #[test]
    fn every_directory_on_the_way_must_be_the_callers_or_roots_and_not_open_to_all() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        // Writable by all, not sticky: anyone could swap `out` for a symlink meanwhile.
        let open_dir = d.path().join("open");
        std::fs::create_dir(&open_dir).unwrap();
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = OutputDir::open(&open_dir.join("out"))
            .err()
            .expect("must be refused");
        assert!(e.to_string().contains("writable by all"), "{e}");
        // Sticky (as /tmp): entries there can be renamed only by their owner.
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        OutputDir::open(&open_dir.join("out")).unwrap();
        if !nix::unistd::geteuid().is_root() {
            println!("SKIP: the other-owner half needs root (chown)");
            return;
        }
        // Another user's directory on the way, holding a symlink to a root-owned directory:
        // what the path resolves to is not trusted, whatever the last directory is.
        let victim = d.path().join("victim");
        std::fs::create_dir_all(victim.join("out")).unwrap();
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::symlink(&victim, theirs.join("proj")).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = OutputDir::open(&theirs.join("proj/out"))
            .err()
            .expect("must be refused");
        assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
        let e = OutputDir::open(&theirs.join("new"))
            .err()
            .expect("must be refused");
        assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
    }

    #[test]
    fn a_symlink_with_a_trailing_slash_is_still_the_output_dir_itself() {
        let d = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        let link = d.path().join("out");
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        let mut slashed = link.into_os_string();
        slashed.push("/");
        let e = OutputDir::open(Path::new(&slashed))
            .err()
            .expect("a symlink must be refused, trailing slash or not");
        assert!(e.to_string().contains("it is a symlink"), "{e}");
    }

    // A sticky directory open to all (/tmp) is trusted for its entries' names, not for the
    // symlinks other users put there: `ln -s /etc /tmp/build` by one user must not send a
    // root caller's `--output-dir /tmp/build/sub` into /etc.
    #[test]
    fn another_users_symlink_in_a_sticky_directory_is_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        if !nix::unistd::geteuid().is_root() {
            println!(
                "SKIP: another_users_symlink_in_a_sticky_directory_is_not_followed needs root (lchown)"
            );
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let sticky = d.path().join("tmp");
        std::fs::create_dir(&sticky).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let link = sticky.join("build");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = OutputDir::open(&sticky.join("build/sub"))
            .err()
            .expect("another user's symlink must not be followed");
        assert!(e.to_string().contains("symlink of uid 65534"), "{e}");
        for below in ["build/sub", "build/"] {
            let e = OutputDir::open(&sticky.join(below))
                .err()
                .expect("another user's symlink must not be followed");
            // `build/` is the output dir itself, a symlink: refused as such.
            assert!(e.to_string().contains("symlink"), "{below}: {e}");
        }
        assert!(
            !victim.join("sub").exists(),
            "a directory was made through the link"
        );
        // The caller's own symlink there is followed, as before.
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        OutputDir::open(&sticky.join("build/sub")).unwrap();
        assert!(victim.join("sub").is_dir());
    }

    #[test]
    fn one_file_that_cannot_be_written_does_not_cost_the_others() {
        let d = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&d.path().join("b"), Mode::from_bits_truncate(0o644)).unwrap();
        let e = write_all(
            d.path(),
            &[file("a", b"A"), file("b", b"B"), file("c", b"C")],
        )
        .unwrap_err();
        assert!(matches!(e, OutputError::Refused { .. }), "{e}");
        assert_eq!(std::fs::read(d.path().join("a")).unwrap(), b"A");
        assert_eq!(std::fs::read(d.path().join("c")).unwrap(), b"C");
        // A listed file (no contents) is never written as an empty one.
        let mut listed = file("d", b"");
        listed.size = 10;
        assert!(write_all(d.path(), &[listed]).is_err());
        assert!(!d.path().join("d").exists());
    }

    /// The program's directories are made with those above them; one already there is
    /// kept; a symlink or a file under a name is neither followed nor replaced, and costs
    /// only that directory.
    #[test]
    fn makes_directories_without_following_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(target.path(), d.path().join("link")).unwrap();
        std::fs::write(d.path().join("file"), b"kept").unwrap();
        std::fs::create_dir(d.path().join("old")).unwrap();
        std::fs::write(d.path().join("old/keep.txt"), b"k").unwrap();
        let out = OutputDir::open(d.path()).unwrap();
        let dirs: Vec<String> = ["a/b/c", "link/x", "link", "file", "old", "e", "../up"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let failed: Vec<String> = out.make_each(&dirs).into_iter().map(|(p, _)| p).collect();
        assert_eq!(failed, ["link/x", "link", "file", "../up"]);
        assert!(d.path().join("a/b/c").is_dir() && d.path().join("e").is_dir());
        assert!(std::fs::read_dir(target.path()).unwrap().next().is_none());
        assert_eq!(std::fs::read(d.path().join("file")).unwrap(), b"kept");
        assert_eq!(std::fs::read(d.path().join("old/keep.txt")).unwrap(), b"k");
    }

    #[test]
    fn rejects_escaping_names() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["../x", "/etc/x", "a/../../x"] {
            assert!(matches!(
                write_all(d.path(), &[file(bad, b"x")]),
                Err(OutputError::BadName(..))
            ));
        }
    }
}

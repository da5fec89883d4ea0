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
}

const HINT: &str =
    "check that --output-dir is a writable directory (symlinks inside it are not followed)";

fn open_dir_at(parent: &OwnedFd, name: &str, shown: &Path) -> Result<OwnedFd, OutputError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match mkdirat(parent, name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(errno) => {
            return Err(OutputError::Io {
                step: "create directory",
                path: shown.into(),
                errno,
                hint: HINT,
            });
        }
    }
    openat(parent, name, flags, Mode::empty()).map_err(|errno| OutputError::Io {
        step: "open directory",
        path: shown.into(),
        errno,
        hint: HINT,
    })
}

/// Writes the run's collected files into `dir`. The program's result stands; a failure to
/// write its files is reported with it, and turns a successful exit into 125, so a script
/// notices.
pub fn deliver(out: &mut crate::outcome::Outcome, dir: &Path) {
    if let Err(e) = write_all(dir, &out.files) {
        let note = format!("cordon could not write the program's files to --output-dir: {e}");
        out.message = Some(match out.message.take() {
            Some(m) => format!("{m}; {note}"),
            None => note,
        });
        if out.cli_exit_code == 0 {
            out.cli_exit_code = crate::outcome::exit_codes::SANDBOX_ERROR;
        }
    }
}

/// Writes `files` under `dir` (created if missing). Existing regular files are replaced.
pub fn write_all(dir: &Path, files: &[OutputFile]) -> Result<(), OutputError> {
    std::fs::create_dir_all(dir).map_err(|e| OutputError::Io {
        step: "create",
        path: dir.into(),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        hint: HINT,
    })?;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let root = open(dir, flags, Mode::empty()).map_err(|errno| OutputError::Io {
        step: "open",
        path: dir.into(),
        errno,
        hint: HINT,
    })?;
    for f in files {
        check_relative_path(&f.path).map_err(|e| OutputError::BadName(f.path.clone(), e.hint))?;
        let parts: Vec<&str> = f.path.split('/').collect();
        let (name, parents) = parts.split_last().expect("a checked path has a component");
        let mut cur: Option<OwnedFd> = None;
        let mut shown = dir.to_path_buf();
        for p in parents {
            shown.push(p);
            let next = open_dir_at(cur.as_ref().unwrap_or(&root), p, &shown)?;
            cur = Some(next);
        }
        shown.push(name);
        let parent = cur.as_ref().unwrap_or(&root);
        let mode = Mode::from_bits_truncate(if f.mode & 0o111 != 0 { 0o755 } else { 0o644 });
        let wflags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC;
        let fd = openat(parent, *name, wflags, mode).map_err(|errno| OutputError::Io {
            step: "create",
            path: shown.clone(),
            errno,
            hint: HINT,
        })?;
        let mut file = std::fs::File::from(fd);
        std::io::Write::write_all(&mut file, &f.data).map_err(|e| OutputError::Io {
            step: "write",
            path: shown.clone(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            hint: HINT,
        })?;
    }
    Ok(())
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

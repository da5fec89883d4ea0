//! The export tmpfs ([`crate::spec::Export`]): seeded by init before the payload starts, and
//! copied by init into the host directory once the payload has exited 0 and every other
//! process of the sandbox is gone (so nothing changes the tree while it is copied).
//!
//! The copy walks both trees with directory fds only (`openat` + `O_NOFOLLOW`,
//! `fstatat(AT_SYMLINK_NOFOLLOW)`, `mkdirat`, `symlinkat`), so no name in the tree can lead the
//! walk or a write elsewhere: directories and regular files are copied (modes kept, at most
//! 0755), symlinks are copied as links (never followed; the caller decides which may stay),
//! FIFOs, sockets and device nodes are left out and counted. What the tree holds is bounded by
//! its tmpfs; what the copy writes is bounded again by the files' apparent sizes, so a sparse
//! file or a file hard-linked a thousand times cannot turn a small tmpfs into a large host
//! tree. Runs as the sandbox's uid: it writes what the sandbox's host uid may write.

use crate::spec::InputFile;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat, mkdirat};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a directory or symlink is charged against the byte cap: one block of a host
/// filesystem.
pub const ENTRY_BYTES: u64 = 4096;

/// What to do when the tree is over a cap (the caps are the export tmpfs's own).
const RAISE_SIZE: &str =
    "raise workspace_size (for a package install: the profile's [packages.limits])";
const RAISE_INODES: &str =
    "raise workspace_inodes (for a package install: the profile's [packages.limits])";

/// Deepest directory level copied (a dependency set may have at most as many: see deps).
pub const MAX_DEPTH: usize = 128;

/// What was copied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// Directories, files and symlinks created.
    pub entries: u64,
    /// Bytes of regular files written.
    pub bytes: u64,
    /// FIFOs, sockets and device nodes left out.
    pub skipped: u64,
}

/// Writes `files` under `dir` (the export tmpfs), as [`super::collect::write_inputs`] does
/// under /workspace.
pub fn seed(dir: &Path, files: &[InputFile]) -> Result<(), String> {
    super::collect::write_files(dir, files)
}

/// Copies the tree at `src` into the directory `dst` (empty), writing at most `max_bytes`
/// bytes and `max_entries` entries; past either, or past [`MAX_DEPTH`], it stops with an
/// error (what was copied so far stays: the caller removes the host directory).
pub fn copy_out(
    src: &Path,
    dst: &OwnedFd,
    max_bytes: u64,
    max_entries: u64,
) -> Result<Copied, String> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let root = nix::fcntl::open(src, flags, Mode::empty())
        .map_err(|e| format!("open {}: {e}", src.display()))?;
    let mut c = Copier {
        copied: Copied::default(),
        max_bytes,
        max_entries,
        top: src.to_path_buf(),
    };
    c.dir(&root, dst, Path::new(""), 0)?;
    Ok(c.copied)
}

struct Copier {
    copied: Copied,
    max_bytes: u64,
    max_entries: u64,
    top: PathBuf,
}

impl Copier {
    fn shown(&self, rel: &Path) -> String {
        self.top.join(rel).display().to_string()
    }

    fn dir(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        rel: &Path,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "{} is more than {MAX_DEPTH} directory levels deep",
                self.shown(rel)
            ));
        }
        let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        for name in list(src).map_err(|e| format!("list {}: {e}", self.shown(rel)))? {
            let name = std::ffi::OsStr::from_bytes(&name);
            let path = rel.join(name);
            let st = fstatat(src, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|e| format!("stat {}: {e}", self.shown(&path)))?;
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind != SFlag::S_IFDIR && kind != SFlag::S_IFREG && kind != SFlag::S_IFLNK {
                self.copied.skipped += 1;
                continue;
            }
            self.copied.entries += 1;
            if self.copied.entries > self.max_entries {
                return Err(format!(
                    "more than {} entries (at {}; each name of a hard-linked file counts); {RAISE_INODES}",
                    self.max_entries,
                    self.shown(&path)
                ));
            }
            // A directory or symlink takes a block of the host's disk (ext4: 4 KiB) where
            // the tmpfs may hold it for almost nothing: each counts one block against the
            // byte cap, a symlink its target's length too.
            self.copied.bytes = self.copied.bytes.saturating_add(match kind {
                SFlag::S_IFREG => 0,
                SFlag::S_IFLNK => ENTRY_BYTES.saturating_add(st.st_size as u64),
                _ => ENTRY_BYTES,
            });
            let shown = self.shown(&path);
            if self.copied.bytes > self.max_bytes {
                return Err(format!(
                    "more than {} bytes (at {shown}; each directory and symlink counts {ENTRY_BYTES} bytes); {RAISE_SIZE}",
                    self.max_bytes
                ));
            }
            let err = |step: &str, e: Errno| format!("{step} {shown}: {e}");
            if kind == SFlag::S_IFDIR {
                mkdirat(dst, name, Mode::from_bits_truncate(0o700)).map_err(|e| err("mkdir", e))?;
                let from =
                    openat(src, name, dir_flags, Mode::empty()).map_err(|e| err("open", e))?;
                let to = openat(dst, name, dir_flags, Mode::empty()).map_err(|e| err("open", e))?;
                self.dir(&from, &to, &path, depth + 1)?;
                // Its mode once it is filled (a 0555 directory could not be filled), set
                // exactly: the umask does not apply.
                nix::sys::stat::fchmod(&to, Mode::from_bits_truncate(st.st_mode & 0o755))
                    .map_err(|e| err("chmod", e))?;
            } else if kind == SFlag::S_IFLNK {
                let target = readlinkat(src, name).map_err(|e| err("readlink", e))?;
                nix::unistd::symlinkat(target.as_os_str(), dst, name)
                    .map_err(|e| err("symlink", e))?;
            } else {
                self.file(src, dst, name, &path, st.st_mode)?;
            }
        }
        Ok(())
    }

    fn file(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &std::ffi::OsStr,
        path: &Path,
        mode: u32,
    ) -> Result<(), String> {
        let shown = self.shown(path);
        let err = |step: &str, e: Errno| format!("{step} {shown}: {e}");
        // O_NONBLOCK: nothing can swap a FIFO in (every other process is gone), and even so
        // it would not block.
        let from_flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let from = openat(src, name, from_flags, Mode::empty()).map_err(|e| err("open", e))?;
        let st = fstat(from.as_fd()).map_err(|e| err("stat", e))?;
        if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
            return Err(format!("{shown} changed type while being copied"));
        }
        let size = st.st_size as u64;
        self.copied.bytes = self.copied.bytes.saturating_add(size);
        if self.copied.bytes > self.max_bytes {
            return Err(format!(
                "more than {} bytes of files (at {shown}, {size} bytes; sparse and hard-linked files count at their full size); {RAISE_SIZE}",
                self.max_bytes
            ));
        }
        let to_flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let to = openat(dst, name, to_flags, Mode::from_bits_truncate(0o600))
            .map_err(|e| err("create", e))?;
        let mut from = std::fs::File::from(from);
        let mut to = std::fs::File::from(to);
        // In the kernel (copy_file_range, else sendfile), at most the size seen.
        let n = std::io::copy(&mut std::io::Read::take(&mut from, size), &mut to)
            .map_err(|e| format!("copy {shown}: {e}"))?;
        if n != size {
            return Err(format!(
                "{shown} changed size while being copied ({n} of {size} bytes)"
            ));
        }
        nix::sys::stat::fchmod(&to, Mode::from_bits_truncate(mode & 0o755))
            .map_err(|e| err("chmod", e))
    }
}

/// The names in `dir`, sorted; any error reading it is an error (a partial listing would be
/// a partial copy).
fn list(dir: &OwnedFd) -> Result<Vec<Vec<u8>>, Errno> {
    let dup = nix::unistd::dup(dir)?;
    let mut d = nix::dir::Dir::from_fd(dup)?;
    let mut names = Vec::new();
    for e in d.iter() {
        let name = e?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn open_dir(p: &Path) -> OwnedFd {
        nix::fcntl::open(
            p,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap()
    }

    fn copy(
        src: &Path,
        max_bytes: u64,
        max_entries: u64,
    ) -> (tempfile::TempDir, Result<Copied, String>) {
        let out = tempfile::tempdir().unwrap();
        let r = copy_out(src, &open_dir(out.path()), max_bytes, max_entries);
        (out, r)
    }

    #[test]
    fn a_tree_is_copied_with_links_as_links_and_special_files_left_out() {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        std::fs::create_dir_all(s.join("pkg/sub")).unwrap();
        std::fs::write(s.join("pkg/mod.py"), b"x = 1\n").unwrap();
        std::fs::write(s.join("pkg/sub/tool"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            s.join("pkg/sub/tool"),
            std::fs::Permissions::from_mode(0o4777),
        )
        .unwrap();
        std::os::unix::fs::symlink("../mod.py", s.join("pkg/sub/link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.join("out")).unwrap();
        nix::unistd::mkfifo(&s.join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(s.join("sock")).unwrap();
        std::fs::set_permissions(s.join("pkg/sub"), std::fs::Permissions::from_mode(0o555))
            .unwrap();

        let (out, r) = copy(s, 1 << 20, 100);
        let c = r.unwrap();
        let o = out.path();
        assert_eq!(
            c,
            Copied {
                entries: 6,
                bytes: 16 + 4 * ENTRY_BYTES + 20, // files, 2 directories, 2 symlinks (targets of 9 and 11 bytes)
                skipped: 2
            }
        );
        assert_eq!(std::fs::read(o.join("pkg/mod.py")).unwrap(), b"x = 1\n");
        // Modes kept but for setuid/setgid/sticky and group/other write.
        assert_eq!(
            std::fs::metadata(o.join("pkg/sub/tool")).unwrap().mode() & 0o7777,
            0o755
        );
        assert_eq!(
            std::fs::metadata(o.join("pkg/sub")).unwrap().mode() & 0o7777,
            0o555
        );
        // Links stay links, unfollowed (the outward one too: deciding is the caller's).
        assert_eq!(
            std::fs::read_link(o.join("pkg/sub/link")).unwrap(),
            Path::new("../mod.py")
        );
        assert_eq!(
            std::fs::read_link(o.join("out")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert!(!o.join("fifo").exists() && !o.join("sock").exists());
        std::fs::set_permissions(o.join("pkg/sub"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::set_permissions(s.join("pkg/sub"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }

    #[test]
    fn sparse_and_hard_linked_files_count_at_their_full_size() {
        let t = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(t.path().join("sparse")).unwrap();
        f.set_len(10 << 20).unwrap();
        let (_out, r) = copy(t.path(), 4 << 20, 100);
        let e = r.unwrap_err();
        assert!(
            e.contains("more than 4194304 bytes")
                && e.contains("sparse")
                && e.contains("raise workspace_size"),
            "{e}"
        );

        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("a"), vec![1u8; 1 << 20]).unwrap();
        for i in 0..8 {
            std::fs::hard_link(t.path().join("a"), t.path().join(format!("l{i}"))).unwrap();
        }
        let (_out, r) = copy(t.path(), 4 << 20, 100);
        assert!(r.unwrap_err().contains("more than 4194304 bytes"));
        let (_out, r) = copy(t.path(), 9 << 20, 100);
        assert_eq!(r.unwrap().bytes, 9 << 20);
    }

    #[test]
    fn empty_directories_and_symlinks_count_against_the_bytes() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..100 {
            std::fs::create_dir(t.path().join(format!("d{i}"))).unwrap();
        }
        let (_out, r) = copy(t.path(), 50 * ENTRY_BYTES, 10_000);
        assert!(r.unwrap_err().contains("each directory and symlink counts"));
    }

    #[test]
    fn entry_count_and_depth_are_bounded() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..20 {
            std::fs::write(t.path().join(format!("f{i}")), b"").unwrap();
        }
        let (_out, r) = copy(t.path(), 1 << 20, 10);
        let e = r.unwrap_err();
        assert!(
            e.contains("more than 10 entries") && e.contains("raise workspace_inodes"),
            "{e}"
        );

        let t = tempfile::tempdir().unwrap();
        let mut p = t.path().to_path_buf();
        for _ in 0..=MAX_DEPTH + 1 {
            p.push("d");
        }
        std::fs::create_dir_all(&p).unwrap();
        let (_out, r) = copy(t.path(), 16 << 20, 10_000);
        let e = r.unwrap_err();
        assert!(e.contains("more than 128 directory levels"), "{e}");
    }

    #[test]
    fn a_symlink_at_the_top_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", t.path().join("top")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let r = copy_out(
            &t.path().join("top"),
            &open_dir(out.path()),
            1 << 30,
            1 << 20,
        );
        let e = r.unwrap_err();
        // O_NOFOLLOW | O_DIRECTORY on a symlink: ELOOP or ENOTDIR, never the target.
        assert!(e.contains("ELOOP") || e.contains("ENOTDIR"), "{e}");
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    }
}

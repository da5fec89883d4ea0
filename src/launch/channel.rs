//! The typed messages between the roles, and the two pipes that carry them.
//!
//! - "go" (parent → init): one byte once the uid/gid maps are written and the child is in its
//!   cgroup. End-of-file instead means the parent died: init exits. When files are to be
//!   collected, the parent keeps the pipe after the second go and sends "stop" on it to end
//!   the run early (timeout, output limit, SIGTERM of cordon): init kills every other process,
//!   collects the files and exits.
//! - "report" (init and payload → parent): JSON lines. The payload's copy is close-on-exec, so
//!   a successful `execve` sends nothing and closes it.

use nix::errno::Errno;
use nix::unistd::{read, write};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};

/// What init and the payload tell the parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// A setup step failed before the program ran. `exit_code` is 125 (cordon failed: a
    /// `sandbox_error`), 126 (cannot execute) or 127 (not found): those two are a
    /// `runtime_error` with that exit code (`classify::outcome`).
    SetupFailed {
        step: String,
        message: String,
        exit_code: i32,
    },
    /// Landlock's outcome, sent by the payload just before seccomp and execve.
    Landlock { status: String, abi: Option<u32> },
    /// init had to show host directories as plain read-only binds (`--allow-degraded
    /// overlay`); the status says why.
    HostViews { status: String },
    /// A size-capped tmpfs of the sandbox (`/workspace`, `/tmp`, `/dev/shm`) was full when
    /// the payload ended: no byte free (`inodes` false) or no inode free (`inodes` true). Sent
    /// by init just before [`Msg::Exited`] or [`Msg::Signaled`].
    Full { path: String, inodes: bool },
    /// The payload's main process exited with this code.
    Exited { code: i32 },
    /// The payload's main process was killed by this signal.
    Signaled { signal: i32 },
    /// A file collected from /workspace after the run begins: its contents follow in
    /// [`Msg::FileData`] chunks, then [`Msg::FileEnd`]. `size` is what `fstat` said (a hint
    /// for the receiver's allocation; `FileEnd` has what was sent).
    FileStart { path: String, mode: u32, size: u64 },
    /// The next `len` bytes on the pipe, right after this line, are the file's contents, raw
    /// (at most [`FILE_CHUNK`]). [`MsgReader`] reads them and gives [`Msg::FileBytes`] in its
    /// place.
    FileData { len: usize },
    /// The bytes a [`Msg::FileData`] announced. Never sent as JSON.
    #[serde(skip)]
    FileBytes(Vec<u8>),
    /// The file begun is complete: `size` bytes were sent.
    FileEnd { size: u64 },
    /// A file found, listed without its contents ([`crate::spec::Collect::contents`] off).
    FileListed { path: String, mode: u32, size: u64 },
    /// A directory found in /workspace that holds nothing sent (no file, no directory
    /// reported below it), so that it is not lost: the directories above it are implied.
    DirListed { path: String },
    /// A file left behind, and why. For the file begun, this ends it: its data is dropped.
    FileOmitted { path: String, reason: String },
    /// An entry left behind whose path (relative to /workspace) is not UTF-8: its exact
    /// bytes, and why. Never a file begun.
    NameOmitted { path: Vec<u8>, reason: String },
    /// This many more entries were left behind than init listed in [`Msg::FileOmitted`]s
    /// and [`Msg::NameOmitted`]s.
    FilesUnlisted { count: u64 },
    /// init walked all of /workspace: every file it sent is complete. Without this message
    /// the collection was cut short (init was killed).
    CollectDone,
    /// init copied the export tmpfs to its host directory (`error`: why it could not).
    /// Without this message after an exit 0 the copy was cut short.
    Exported { error: Option<String> },
}

/// The largest piece of a file in one [`Msg::FileData`]. Raw bytes, not base64 in JSON: the
/// collection costs a copy, not an encoding, in init (whose CPU time is the sandbox's) and in
/// cordon.
pub const FILE_CHUNK: usize = 64 << 10;

/// The sending side of the report pipe.
pub struct Reporter {
    fd: OwnedFd,
}

impl Reporter {
    pub fn new(fd: OwnedFd) -> Self {
        Reporter { fd }
    }

    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn owned(&self) -> &OwnedFd {
        &self.fd
    }

    /// Sends one message as a single `write` (under PIPE_BUF, so it is never interleaved with
    /// the other writer's messages).
    pub fn send(&self, msg: &Msg) {
        // Only [`Msg::FileBytes`] cannot be serialised, and it is never sent as a line.
        let Ok(mut line) = serde_json::to_vec(msg) else {
            return;
        };
        line.truncate(libc::PIPE_BUF - 1);
        line.push(b'\n');
        // A parent that is gone cannot be told anything; the send is best-effort by nature.
        let _ = write(&self.fd, &line);
    }

    /// Sends one message of any size. Only for init, once the payload and every other
    /// process of the sandbox are dead: nothing else writes the pipe then.
    pub fn send_large(&self, msg: &Msg) -> Result<(), Errno> {
        let mut line = serde_json::to_vec(msg).map_err(|_| Errno::EINVAL)?;
        line.push(b'\n');
        self.write_all(&line)
    }

    /// Sends `bytes` (at most [`FILE_CHUNK`]) as one [`Msg::FileData`]: its line, then the
    /// bytes. Like [`Self::send_large`], only for init once it is alone: nothing may come
    /// between the two.
    pub fn send_chunk(&self, bytes: &[u8]) -> Result<(), Errno> {
        debug_assert!(bytes.len() <= FILE_CHUNK);
        self.send_large(&Msg::FileData { len: bytes.len() })?;
        self.write_all(bytes)
    }

    fn write_all(&self, mut rest: &[u8]) -> Result<(), Errno> {
        while !rest.is_empty() {
            match write(&self.fd, rest) {
                Ok(n) => rest = &rest[n..],
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn fail(&self, step: &str, message: impl std::fmt::Display, exit_code: i32) {
        self.send(&Msg::SetupFailed {
            step: step.to_string(),
            message: message.to_string(),
            exit_code,
        });
    }
}

/// The longest report line accepted. The longest sent is a [`Msg::FileOmitted`] or a
/// [`Msg::NameOmitted`] (a path and a reason, a few KiB at most); file contents are not in lines (see [`Msg::FileData`]).
const MAX_LINE: usize = 1 << 20;

/// Reassembles JSON lines from the report pipe, and the raw bytes that follow a
/// [`Msg::FileData`] line. Linear in what it is fed: only the bytes of each read are searched
/// for a line's end (never the part of a line already held), and a line is copied only when
/// it spans reads (a line within one read is parsed where it lies).
#[derive(Default)]
pub struct MsgReader {
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// The current line went over [`MAX_LINE`] (already reported): skip to its end.
    skipping: bool,
    /// The raw bytes of a [`Msg::FileData`] being read, and how many are still to come.
    raw: Vec<u8>,
    raw_left: usize,
    /// A [`Msg::FileData`] announced more than [`FILE_CHUNK`]: where the next line starts is
    /// unknown, so nothing after it is read (reported once).
    lost: bool,
}

fn too_long() -> Msg {
    Msg::SetupFailed {
        step: "report".into(),
        message: format!("a message from the sandbox exceeded {MAX_LINE} bytes"),
        exit_code: 125,
    }
}

fn parse_line(line: &[u8]) -> Msg {
    serde_json::from_slice::<Msg>(line).unwrap_or_else(|e| Msg::SetupFailed {
        step: "report".into(),
        message: format!("garbled message from the sandbox: {e}"),
        exit_code: 125,
    })
}

impl MsgReader {
    /// Feeds bytes read from the pipe and returns the complete messages among them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Msg> {
        let mut out = Vec::new();
        let mut rest = bytes;
        loop {
            if self.lost {
                return out;
            }
            if self.raw_left > 0 {
                let n = self.raw_left.min(rest.len());
                self.raw.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                self.raw_left -= n;
                if self.raw_left > 0 {
                    return out;
                }
                out.push(Msg::FileBytes(std::mem::take(&mut self.raw)));
            }
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                break;
            };
            let head = &rest[..nl];
            rest = &rest[nl + 1..];
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            let msg = if self.partial.is_empty() {
                if head.len() > MAX_LINE {
                    too_long()
                } else {
                    parse_line(head)
                }
            } else {
                let m = if self.partial.len() + head.len() > MAX_LINE {
                    too_long()
                } else {
                    self.partial.extend_from_slice(head);
                    parse_line(&self.partial)
                };
                self.partial.clear();
                m
            };
            match msg {
                Msg::FileData { len } if len > FILE_CHUNK => {
                    self.lost = true;
                    out.push(Msg::SetupFailed {
                        step: "report".into(),
                        message: format!(
                            "garbled message from the sandbox: a file chunk of {len} bytes (at most {FILE_CHUNK})"
                        ),
                        exit_code: 125,
                    });
                }
                Msg::FileData { len: 0 } => out.push(Msg::FileBytes(Vec::new())),
                Msg::FileData { len } => {
                    self.raw = Vec::with_capacity(len);
                    self.raw_left = len;
                }
                m => out.push(m),
            }
        }
        if !self.skipping {
            if self.partial.len() + rest.len() > MAX_LINE {
                self.partial = Vec::new();
                self.skipping = true;
                out.push(too_long());
            } else {
                self.partial.extend_from_slice(rest);
            }
        }
        out
    }
}

/// Blocks until the parent says go (true) or dies (false).
pub fn wait_for_go(fd: &OwnedFd) -> bool {
    let mut b = [0u8; 1];
    loop {
        match read(fd, &mut b) {
            Ok(1) => return true,
            Ok(_) => return false,
            Err(Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Tells init to go.
pub fn send_go(fd: &OwnedFd) -> Result<(), Errno> {
    write(fd, b"g").map(|_| ())
}

/// Tells init to stop the run: kill every other process, collect the files, exit.
pub fn send_stop(fd: &OwnedFd) -> Result<(), Errno> {
    write(fd, STOP).map(|_| ())
}

/// The byte [`send_stop`] writes.
pub const STOP: &[u8; 1] = b"s";

/// Sends `fds` (1 to [`MAX_FDS`]) in one message on the unix socket `sock` (SCM_RIGHTS); the
/// message's one byte is their number, which [`recv_fds`] checks.
pub fn send_fds(sock: &OwnedFd, fds: &[OwnedFd]) -> Result<(), Errno> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    if fds.is_empty() || fds.len() > MAX_FDS {
        return Err(Errno::EINVAL);
    }
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let count = [fds.len() as u8];
    let iov = [std::io::IoSlice::new(&count)];
    // MSG_NOSIGNAL: a receiver gone is EPIPE, not a SIGPIPE to whatever process cordon is.
    sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None).map(|_| ())
}

/// Receives the descriptors one [`send_fds`] sent (blocking; at most [`MAX_FDS`]), close-on-
/// exec: all of them or an error, never some (`EBADMSG` when the kernel delivered fewer than
/// were sent, e.g. at the descriptor limit). End-of-file (the sender died) is `EPIPE`.
pub fn recv_fds(sock: &OwnedFd) -> Result<Vec<OwnedFd>, Errno> {
    let mut byte = [0u8; 1];
    let (len, got) = recv_bytes_and_fds(sock, &mut byte)?;
    if len == 0 && got.is_empty() {
        return Err(Errno::EPIPE);
    }
    if len != 1 || usize::from(byte[0]) != got.len() {
        // `got` is closed on return.
        return Err(Errno::EBADMSG);
    }
    Ok(got)
}

/// Receives one message (blocking): its bytes into `buf` (their number is returned; 0 at
/// end-of-file) and the descriptors that came with it (at most [`MAX_FDS`]), close-on-exec.
/// `EBADMSG` when the kernel delivered fewer descriptors than were sent.
pub fn recv_bytes_and_fds(sock: &OwnedFd, buf: &mut [u8]) -> Result<(usize, Vec<OwnedFd>), Errno> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; MAX_FDS]);
    let msg = loop {
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(Errno::EINTR) => continue,
            other => break other?,
        }
    };
    let mut got = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            got.extend(fds.into_iter().map(crate::sys::own_received_fd));
        }
    }
    if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        // `got` is closed on return.
        return Err(Errno::EBADMSG);
    }
    Ok((msg.bytes, got))
}

/// The most descriptors [`recv_fds`] takes in one message.
pub const MAX_FDS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_splits_lines_and_keeps_partial() {
        let mut r = MsgReader::default();
        let a = serde_json::to_string(&Msg::Exited { code: 3 }).unwrap();
        let b = serde_json::to_string(&Msg::Signaled { signal: 9 }).unwrap();
        let all = format!("{a}\n{b}\n");
        let (x, y) = all.as_bytes().split_at(a.len() + 5);
        assert_eq!(r.feed(x), vec![Msg::Exited { code: 3 }]);
        assert_eq!(r.feed(y), vec![Msg::Signaled { signal: 9 }]);
        assert!(r.feed(b"").is_empty());
    }

    #[test]
    fn descriptors_pass_through_a_socket_and_eof_is_epipe() {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let (r, w) = nix::unistd::pipe().unwrap();
        send_fds(&a, &[w]).unwrap();
        let got = recv_fds(&b).unwrap();
        assert_eq!(got.len(), 1);
        // The received descriptor is the pipe's write end: what goes in comes out of `r`.
        write(&got[0], b"x").unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(read(&r, &mut buf).unwrap(), 1);
        assert_eq!(&buf, b"x");
        // A message whose count does not match what arrived is refused whole.
        {
            use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
            use std::os::fd::AsRawFd;
            let (_r2, w2) = nix::unistd::pipe().unwrap();
            let raw = [w2.as_raw_fd()];
            let iov = [std::io::IoSlice::new(&[2u8])];
            sendmsg::<()>(
                a.as_raw_fd(),
                &iov,
                &[ControlMessage::ScmRights(&raw)],
                MsgFlags::empty(),
                None,
            )
            .unwrap();
            assert_eq!(recv_fds(&b).unwrap_err(), Errno::EBADMSG);
        }
        assert_eq!(send_fds(&a, &[]).unwrap_err(), Errno::EINVAL);
        drop(a);
        assert_eq!(recv_fds(&b).unwrap_err(), Errno::EPIPE);
    }

    /// The same stream fed whole, byte by byte and in pieces of other sizes (lines split
    /// anywhere, raw file chunks between lines, a chunk split across reads) gives the same
    /// messages, in order.
    #[test]
    fn reader_reassembles_lines_fed_in_small_pieces() {
        let long: String = (0..200_000u32)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        // Raw bytes that look like lines: newlines and JSON must not confuse the reader.
        let mut raw: Vec<u8> = b"{\"Exited\":{\"code\":1}}\n\n".to_vec();
        raw.extend((0..FILE_CHUNK - raw.len()).map(|i| (i % 251) as u8));
        let mut stream = Vec::new();
        let mut want = Vec::new();
        let line = |m: Msg, stream: &mut Vec<u8>| {
            serde_json::to_writer(&mut *stream, &m).unwrap();
            stream.push(b'\n');
        };
        for m in [
            Msg::Exited { code: 0 },
            Msg::FileOmitted {
                path: "x/y".into(),
                reason: long.clone(),
            },
            Msg::FileStart {
                path: "f".into(),
                mode: 0o644,
                size: raw.len() as u64 + 3,
            },
        ] {
            line(m.clone(), &mut stream);
            want.push(m);
        }
        line(Msg::FileData { len: raw.len() }, &mut stream);
        stream.extend_from_slice(&raw);
        want.push(Msg::FileBytes(raw.clone()));
        line(Msg::FileData { len: 3 }, &mut stream);
        stream.extend_from_slice(b"\n\n\n");
        want.push(Msg::FileBytes(b"\n\n\n".to_vec()));
        line(Msg::FileData { len: 0 }, &mut stream);
        want.push(Msg::FileBytes(Vec::new()));
        for m in [
            Msg::FileEnd {
                size: raw.len() as u64 + 3,
            },
            Msg::CollectDone,
            Msg::Signaled { signal: 9 },
        ] {
            line(m.clone(), &mut stream);
            want.push(m);
        }
        for piece in [1, 2, 3, 7, 64, 4096, 65536, stream.len()] {
            let mut r = MsgReader::default();
            let mut got = Vec::new();
            for p in stream.chunks(piece) {
                got.extend(r.feed(p));
            }
            assert_eq!(got, want, "fed in pieces of {piece} bytes");
            assert!(
                r.partial.is_empty() && r.raw_left == 0,
                "pieces of {piece}: a complete stream leaves nothing held"
            );
        }
    }

    /// A line over MAX_LINE is reported once and skipped to its end; the next line is read.
    #[test]
    fn reader_skips_an_over_long_line() {
        let mut r = MsgReader::default();
        let mut got = Vec::new();
        for _ in 0..=MAX_LINE / 4096 {
            got.extend(r.feed(&[b'x'; 4096]));
        }
        got.extend(r.feed(b"xxx\n{\"Exited\":{\"code\":4}}\n"));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            matches!(&got[0], Msg::SetupFailed { message, .. } if message.contains("exceeded")),
            "{got:?}"
        );
        assert_eq!(got[1], Msg::Exited { code: 4 });
    }

    /// A chunk announced over FILE_CHUNK: the stream cannot be followed past it, so it is
    /// one failure and nothing after it (not the raw bytes read as messages).
    #[test]
    fn reader_stops_at_an_oversized_chunk() {
        let mut r = MsgReader::default();
        let m = r.feed(
            format!(
                "{{\"FileData\":{{\"len\":{}}}}}\n{{\"Exited\":{{\"code\":0}}}}\n",
                FILE_CHUNK + 1
            )
            .as_bytes(),
        );
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            matches!(&m[0], Msg::SetupFailed { exit_code: 125, message, .. } if message.contains("file chunk")),
            "{m:?}"
        );
        assert!(r.feed(b"{\"Exited\":{\"code\":0}}\n").is_empty());
    }

    /// What send_chunk writes is what the reader gives back.
    #[test]
    fn send_chunk_round_trips() {
        let (rd, wr) = nix::unistd::pipe().unwrap();
        let rep = Reporter::new(wr);
        rep.send_chunk(b"ab\ncd").unwrap();
        rep.send_large(&Msg::CollectDone).unwrap();
        drop(rep);
        let mut r = MsgReader::default();
        let mut got = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            match read(&rd, &mut buf).unwrap() {
                0 => break,
                n => got.extend(r.feed(&buf[..n])),
            }
        }
        assert_eq!(
            got,
            vec![Msg::FileBytes(b"ab\ncd".to_vec()), Msg::CollectDone]
        );
    }

    #[test]
    fn garbage_becomes_a_setup_failure() {
        let mut r = MsgReader::default();
        let m = r.feed(b"nonsense\n");
        assert!(matches!(&m[0], Msg::SetupFailed { exit_code: 125, .. }));
    }
}

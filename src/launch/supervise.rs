//! The parent's supervision loop: one `poll` over the sandbox's stdio pipes, the report pipe,
//! a pidfd for init and a signalfd, with the wall-clock deadline as its timeout. No threads.

use super::channel::{Msg, MsgReader};
use super::collect::ReceivedFiles;
use super::memwatch::{MemWatch, Received, Verdict, WatchReport};
use crate::limits::Cgroup;
use crate::outcome::OutputEncoding;
use crate::spec::{SandboxSpec, StdinSource};
use crate::sys;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::WaitStatus;
use nix::unistd::{Pid, read, write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// After init exits, how long to keep reading output that is still in the pipes. Every
/// writer died with the pid namespace, so this only bounds a pathological case.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// After "stop" (see [`Stopper`]), or after the payload's main process ended by itself, how
/// long init may take to kill the rest and collect the files before the whole sandbox is
/// SIGKILLed, files or not (the result then says the collection was cut short).
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often the CPU-time limit is checked against the cgroup's counter.
pub(crate) const CPU_CHECK_EVERY: Duration = Duration::from_millis(100);
const CHUNK: usize = 64 * 1024;

/// The parent's ends of the sandbox's pipes.
pub struct Io {
    pub stdin: OwnedFd,
    pub stdin_file: Option<std::fs::File>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub report: OwnedFd,
    /// The go pipe, kept after the second go when files are to be collected: ending the run
    /// early then goes through init (see [`Stopper`]).
    pub stop: Option<OwnedFd>,
    /// The rlimit backend's memory watch: the limit, and the socket init sends its /proc on.
    pub memory_watch: Option<(u64, OwnedFd)>,
}

/// Ends the run early (timeout, output limit, CPU time, a signal to cordon). With a stop
/// channel, init is asked to kill every other process and collect the files, and gets
/// [`STOP_GRACE`] to do it; otherwise (or when init cannot be told) the sandbox is SIGKILLed.
struct Stopper {
    stop: Option<OwnedFd>,
    grace_until: Option<Instant>,
    /// Why init's grace began (the first cause: a grace is never extended).
    grace_cause: Option<Grace>,
    /// init overran its grace and the sandbox was SIGKILLed.
    expired: bool,
}

/// Why init was given [`STOP_GRACE`] to finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grace {
    /// cordon asked it to stop (a limit, a signal to cordon).
    Stopped,
    /// The program ended and init was collecting the files.
    Collecting,
}

impl Stopper {
    fn stop(&mut self, child: Pid, pidfd: Option<&OwnedFd>, cgroup: Option<&Cgroup>) {
        if let Some(fd) = self.stop.take()
            && super::channel::send_stop(&fd).is_ok()
        {
            self.start_grace(Grace::Stopped);
            return;
        }
        kill_all(child, pidfd, cgroup);
    }

    /// Gives init [`STOP_GRACE`] from now; a grace already running is not extended.
    fn start_grace(&mut self, cause: Grace) {
        if self.grace_until.is_none() && !self.expired {
            self.grace_until = Some(Instant::now() + STOP_GRACE);
            self.grace_cause = Some(cause);
        }
    }

    /// SIGKILLs the sandbox if init overran its grace; returns when to check again.
    fn enforce_grace(
        &mut self,
        child: Pid,
        pidfd: Option<&OwnedFd>,
        cgroup: Option<&Cgroup>,
        now: Instant,
    ) -> Option<Instant> {
        match self.grace_until {
            Some(t) if now >= t => {
                self.grace_until = None;
                self.expired = true;
                kill_all(child, pidfd, cgroup);
                None
            }
            other => other,
        }
    }
}

/// One captured stream, cut at the output limit.
#[derive(Debug, Default)]
pub struct Capture {
    pub data: Vec<u8>,
    pub total: u64,
    /// Bytes taken under the output limit: all of `data`, or more where only a tail of them
    /// is kept (pass-through).
    kept: u64,
    pub truncated: bool,
    /// What pass-through mode still has to copy to cordon's own stdout/stderr.
    passed: Backlog,
}

/// Bytes waiting to be written to cordon's own stdout or stderr (pass-through, `--stream`).
/// Written only when that fd polls writable, so a slow reader of cordon never blocks
/// supervision; past [`PENDING_MAX`] the sandbox's pipes are not read (the program blocks,
/// as with any pipe).
#[derive(Debug, Default)]
struct Backlog {
    bytes: Vec<u8>,
    /// cordon's own stdout/stderr stopped accepting (EPIPE...): what is left is dropped.
    closed: bool,
    /// ...because its reader is gone (EPIPE).
    reader_gone: bool,
}

impl Backlog {
    fn push(&mut self, bytes: &[u8]) {
        if !self.closed {
            self.bytes.extend_from_slice(bytes);
        }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Whether the sandbox's pipes may be read now (the backlog under its cap).
    fn accepting(&self) -> bool {
        self.bytes.len() < PENDING_MAX
    }

    /// Copies some of the bytes to `sink` (which polled writable).
    fn flush_some(&mut self, sink: BorrowedFd) {
        let n = self.bytes.len().min(SINK_WRITE);
        match write(sink, &self.bytes[..n]) {
            Ok(w) => {
                self.bytes.drain(..w);
            }
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            // The caller's own stdout closing is no reason to stop supervising the sandbox.
            Err(e) => {
                self.closed = true;
                self.reader_gone = e == Errno::EPIPE;
                self.bytes.clear();
            }
        }
    }

    /// Writes all of the bytes to `sink`, waiting for it as long as it takes (the sandbox
    /// is gone: nothing is left to supervise).
    fn drain(&mut self, sink: BorrowedFd) {
        while !self.bytes.is_empty() && !self.closed {
            match write(sink, &self.bytes) {
                Ok(n) => {
                    self.bytes.drain(..n);
                }
                Err(Errno::EINTR) => continue,
                // A terminal reopened non-blocking (see terminal_sink): wait until it takes more.
                Err(Errno::EAGAIN) => {
                    let mut fds = [PollFd::new(sink, PollFlags::POLLOUT)];
                    let _ = poll(&mut fds, PollTimeout::NONE);
                }
                Err(_) => self.closed = true,
            }
        }
    }
}

/// Pass-through bytes held for a slow reader of cordon, per stream.
const PENDING_MAX: usize = 1 << 20;
/// Largest single write to cordon's own stdout/stderr: a pipe that polls writable takes
/// PIPE_BUF bytes without blocking.
const SINK_WRITE: usize = libc::PIPE_BUF;

/// In pass-through mode, where no result object carries the output, how much of stderr cordon
/// holds: its last words, which the notes read (missing modules, errno texts). Of stdout it
/// holds nothing, so a large output costs no memory however high `--output-limit` is.
const PASSTHROUGH_STDERR_TAIL: usize = 64 << 10;

impl Capture {
    /// Takes what fits under `limit`; returns how many of `bytes` it took (fewer than all
    /// once the limit is exceeded, which `truncated` then says). `passed_tail`: pass-through,
    /// where what is taken is also queued for cordon's own stdout/stderr and only about the
    /// last `n` bytes of it are held in `data` (between `n` and twice that).
    fn push(&mut self, bytes: &[u8], limit: u64, passed_tail: Option<usize>) -> usize {
        self.total += bytes.len() as u64;
        let room = limit.saturating_sub(self.kept) as usize;
        let kept = &bytes[..bytes.len().min(room)];
        self.kept += kept.len() as u64;
        self.data.extend_from_slice(kept);
        if let Some(n) = passed_tail
            && self.data.len() > 2 * n
        {
            let cut = self.data.len() - n;
            self.data.drain(..cut);
        }
        if passed_tail.is_some() {
            self.passed.push(kept);
        }
        if kept.len() < bytes.len() {
            self.truncated = true;
        }
        kept.len()
    }
}

/// The program's output as it arrives, as JSON lines on cordon's stdout (`--stream`): one
/// `{"stdout": "..."}` or `{"stderr": "..."}` per piece read, in the order read. Text pieces
/// end on a whole character (a character cut by the read waits for its next piece), and bytes
/// that are not UTF-8 become U+FFFD; base64 pieces are the exact bytes. Like pass-through,
/// written only when cordon's stdout polls writable; past [`PENDING_MAX`] the sandbox's pipes
/// are not read.
#[derive(Debug)]
struct Events {
    encoding: OutputEncoding,
    /// The phase whose pieces these are (`SandboxSpec::stream_phase`): each is wrapped in an
    /// object of that name.
    phase: Option<&'static str>,
    lines: Backlog,
    /// The start of a character the last text piece of stdout, of stderr, ended inside.
    carry: [Vec<u8>; 2],
}

impl Events {
    fn new(encoding: OutputEncoding, phase: Option<&'static str>) -> Self {
        Events {
            encoding,
            phase,
            lines: Backlog::default(),
            carry: [Vec::new(), Vec::new()],
        }
    }

    /// Adds a line for `bytes` of stdout (`err` false) or stderr.
    fn add(&mut self, err: bool, bytes: &[u8]) {
        if self.lines.closed || bytes.is_empty() {
            return;
        }
        let key = if err { "stderr" } else { "stdout" };
        let text = match self.encoding {
            OutputEncoding::Base64 => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.encode(bytes)
            }
            OutputEncoding::Utf8 => {
                let carry = &mut self.carry[usize::from(err)];
                carry.extend_from_slice(bytes);
                let whole = carry.len() - crate::outcome::split_char_len(carry);
                let text = String::from_utf8_lossy(&carry[..whole]).into_owned();
                carry.drain(..whole);
                text
            }
        };
        self.line(key, &text);
    }

    /// The characters left cut at the end of each stream (the stream ended): as U+FFFD, as
    /// the result's text has them, unless the output limit cut them (`cut`, for stdout and
    /// stderr), which the result's text leaves out whole.
    fn finish(&mut self, cut: [bool; 2]) {
        for (i, key) in ["stdout", "stderr"].into_iter().enumerate() {
            let rest = std::mem::take(&mut self.carry[i]);
            if !rest.is_empty() && !self.lines.closed && !cut[i] {
                self.line(key, &String::from_utf8_lossy(&rest));
            }
        }
    }

    fn line(&mut self, key: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut map = serde_json::Map::new();
        map.insert(key.to_string(), serde_json::Value::String(text.to_string()));
        if let Some(phase) = self.phase {
            let inner = serde_json::Value::Object(std::mem::take(&mut map));
            map.insert(phase.to_string(), inner);
        }
        if let Ok(mut line) = serde_json::to_vec(&map) {
            line.push(b'\n');
            self.lines.push(&line);
        }
    }
}

/// Everything the supervisor saw.
#[derive(Debug, Default)]
pub struct Ended {
    /// Every message but the files'...
    pub msgs: Vec<Msg>,
    /// ...which are put together here as they arrive.
    pub collected: ReceivedFiles,
    pub init_status: Option<WaitStatus>,
    pub rusage_cpu: Option<Duration>,
    pub rusage_maxrss: Option<u64>,
    pub timed_out: bool,
    pub cpu_timed_out: bool,
    pub output_limited: bool,
    pub interrupted: Option<Signal>,
    pub stdout: Capture,
    pub stderr: Capture,
    pub wall: Duration,
    pub internal_error: Option<String>,
    /// init did not exit within [`STOP_GRACE`] of being asked to stop, or of the program's
    /// end while it collected files: cordon SIGKILLed it. Holds why the grace began.
    pub grace_expired: Option<Grace>,
    /// The rlimit backend's memory watch, when it ran (see [`super::memwatch`]).
    pub memory_watch: Option<WatchReport>,
    /// At the timeout, the program's stdin was still open with nothing left for it to read:
    /// if it was reading, it was waiting for input that never came.
    pub stdin_starved: bool,
}

enum StdinState {
    Closed,
    /// Read from this fd (cordon's stdin or the --stdin file) into `buf`, write to the pipe.
    Source(OwnedFdOrStdin),
}

enum OwnedFdOrStdin {
    /// A duplicate of cordon's fd 0 (so a closed fd 0 is noticed once, at the start).
    Stdin(OwnedFd),
    File(std::fs::File),
}

impl OwnedFdOrStdin {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            OwnedFdOrStdin::Stdin(f) => f.as_fd(),
            OwnedFdOrStdin::File(f) => f.as_fd(),
        }
    }
}

/// Supervises the sandbox whose init is `child` until init has exited and its output is
/// drained. Kills the sandbox at the deadline, at an output-limit breach, at the CPU-time
/// limit, and when cordon receives SIGINT/SIGTERM/SIGHUP.
pub fn supervise(
    spec: &SandboxSpec,
    child: Pid,
    io: Io,
    cgroup: Option<&Cgroup>,
    signals: SigSet,
    started: Instant,
) -> Ended {
    let mut ended = Ended {
        collected: spec
            .collect
            .as_ref()
            .map_or(ReceivedFiles::default(), ReceivedFiles::for_spec),
        ..Ended::default()
    };
    let limits = &spec.limits;
    let deadline = started + limits.wall;
    // Without a signalfd the blocked signals would be ignored: unblock them instead, so that
    // SIGTERM/SIGINT kill cordon outright and the parent-death signal takes the sandbox along.
    let sfd = match SignalFd::with_flags(&signals, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
        Ok(fd) => Some(fd),
        Err(_) => {
            let _ = nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_UNBLOCK,
                Some(&signals),
                None,
            );
            None
        }
    };
    let pidfd = match sys::pidfd_open(child) {
        Ok(fd) => Some(fd),
        Err(e) => {
            ended.internal_error = Some(format!(
                "cannot watch the sandbox's init (pidfd_open): {e}; Linux 5.3+ is needed"
            ));
            kill_all(child, None, cgroup);
            None
        }
    };
    let Io {
        stdin: stdin_pipe,
        stdin_file,
        stdout,
        stderr,
        report,
        stop,
        memory_watch,
    } = io;
    let (mut watch, mut watch_sock) = match memory_watch {
        Some((limit, sock)) => {
            let mut own = vec![
                stdin_pipe.as_fd(),
                stdout.as_fd(),
                stderr.as_fd(),
                report.as_fd(),
            ];
            own.extend(stop.as_ref().map(|s| s.as_fd()));
            (
                Some({
                    let mut w = MemWatch::new(limit, &own);
                    if let Some(e) = &spec.export {
                        w.watch_extra_tmpfs(&e.dir);
                    }
                    w
                }),
                Some(sock),
            )
        }
        None => (None, None),
    };
    let mut stopper = Stopper {
        stop,
        grace_until: None,
        grace_cause: None,
        expired: false,
    };
    let mut stdin_pipe = Some(stdin_pipe);
    let mut stdin_buf: Vec<u8> = Vec::new();
    let mut stdin_state = match (&spec.stdin, stdin_file) {
        (StdinSource::Forward, _) => match nix::unistd::dup(std::io::stdin()) {
            Ok(fd) => StdinState::Source(OwnedFdOrStdin::Stdin(fd)),
            Err(_) => StdinState::Closed,
        },
        (StdinSource::File(_), Some(f)) => StdinState::Source(OwnedFdOrStdin::File(f)),
        (StdinSource::Bytes(b), _) => {
            stdin_buf = b.clone();
            StdinState::Closed
        }
        _ => StdinState::Closed,
    };
    if let Some(p) = &stdin_pipe {
        let _ = nix::fcntl::fcntl(
            p,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        );
    }
    let mut out = Some(stdout);
    let mut err = Some(stderr);
    let mut rep = Some(report);
    let mut reader = MsgReader::default();
    let mut init_exited = pidfd.is_none();
    let mut drain_deadline: Option<Instant> = None;
    let mut killed = false;
    // The payload's main process has ended and init is collecting the files (it has killed
    // every other process first): the program's wall-clock and CPU-time limits no longer
    // apply, init's grace does.
    let mut collecting = false;
    let mut buf = vec![0u8; CHUNK];
    let (std_out, std_err) = (std::io::stdout(), std::io::stderr());
    let (stdout_tty, stderr_tty) = (
        terminal_sink(std_out.as_fd()),
        terminal_sink(std_err.as_fd()),
    );
    let host_out = stdout_tty.as_ref().map_or(std_out.as_fd(), |f| f.as_fd());
    let host_err = stderr_tty.as_ref().map_or(std_err.as_fd(), |f| f.as_fd());
    let mut events = spec.stream.map(|e| Events::new(e, spec.stream_phase));
    let events_accepting = |e: &Option<Events>| e.as_ref().is_none_or(|e| e.lines.accepting());

    loop {
        if matches!(stdin_state, StdinState::Closed) && stdin_buf.is_empty() {
            stdin_pipe = None;
        }
        let now = Instant::now();
        if init_exited {
            let dl = *drain_deadline.get_or_insert(now + DRAIN_TIMEOUT);
            let flushed = ended.stdout.passed.is_empty()
                && ended.stderr.passed.is_empty()
                && events.as_ref().is_none_or(|e| e.lines.is_empty());
            if (out.is_none() && err.is_none() && rep.is_none() && flushed) || now >= dl {
                break;
            }
        } else if now >= deadline && !killed && !collecting {
            ended.timed_out = true;
            // Open, with nothing more to come from cordon and nothing left in the pipe.
            ended.stdin_starved = stdin_buf.is_empty()
                && matches!(stdin_state, StdinState::Source(_))
                && stdin_pipe
                    .as_ref()
                    .is_some_and(|p| sys::pipe_unread(p.as_fd()) == Ok(0));
            killed = true;
            stopper.stop(child, pidfd.as_ref(), cgroup);
        }
        let grace = if init_exited {
            None
        } else {
            stopper.enforce_grace(child, pidfd.as_ref(), cgroup, now)
        };

        // Build the poll set; remember which slot is which.
        let mut fds: Vec<PollFd> = Vec::with_capacity(8);
        let mut slots: Vec<u8> = Vec::with_capacity(8);
        let pin = PollFlags::POLLIN;
        if let Some(f) = &out
            && ended.stdout.passed.accepting()
            && events_accepting(&events)
        {
            fds.push(PollFd::new(f.as_fd(), pin));
            slots.push(b'o');
        }
        if let Some(f) = &err
            && ended.stderr.passed.accepting()
            && events_accepting(&events)
        {
            fds.push(PollFd::new(f.as_fd(), pin));
            slots.push(b'e');
        }
        if !ended.stdout.passed.is_empty() {
            fds.push(PollFd::new(host_out, PollFlags::POLLOUT));
            slots.push(b'O');
        }
        if !ended.stderr.passed.is_empty() {
            fds.push(PollFd::new(host_err, PollFlags::POLLOUT));
            slots.push(b'E');
        }
        if events.as_ref().is_some_and(|e| !e.lines.is_empty()) {
            fds.push(PollFd::new(host_out, PollFlags::POLLOUT));
            slots.push(b'V');
        }
        if let Some(f) = &rep {
            fds.push(PollFd::new(f.as_fd(), pin));
            slots.push(b'r');
        }
        if !init_exited && let Some(f) = &pidfd {
            fds.push(PollFd::new(f.as_fd(), pin));
            slots.push(b'p');
        }
        if let Some(s) = &sfd {
            fds.push(PollFd::new(s.as_fd(), pin));
            slots.push(b's');
        }
        if !init_exited && let Some(m) = &watch_sock {
            fds.push(PollFd::new(m.as_fd(), pin));
            slots.push(b'm');
        }
        // The memory-watch layer's notifications: a shared anonymous mapping's creation, or
        // a large private writable request, waits until it is recorded and answered here
        // (see memwatch::MemWatch::notified).
        if !init_exited && let Some(l) = watch.as_ref().and_then(MemWatch::listener) {
            fds.push(PollFd::new(l, pin));
            slots.push(b'n');
        }
        if let Some(p) = &stdin_pipe {
            if !stdin_buf.is_empty() {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLOUT));
                slots.push(b'w');
            } else if let StdinState::Source(src) = &stdin_state {
                fds.push(PollFd::new(src.fd(), pin));
                slots.push(b'i');
            }
        }
        let until = if init_exited {
            drain_deadline.unwrap_or(now)
        } else if collecting {
            // Until init's grace ends; once it overran (SIGKILLed), until init is reaped.
            grace.unwrap_or(now + Duration::from_millis(10))
        } else {
            grace.map_or(deadline, |g| g.min(deadline.max(now)))
        };
        let mut wait = until.saturating_duration_since(now);
        if limits.cpu_time.is_some() && cgroup.is_some() {
            wait = wait.min(CPU_CHECK_EVERY);
        }
        if !killed
            && !init_exited
            && let Some(due) = watch.as_ref().and_then(MemWatch::due)
        {
            wait = wait.min(due.saturating_duration_since(now));
        }
        if killed && !init_exited {
            wait = wait.max(Duration::from_millis(10));
        }
        let timeout =
            PollTimeout::try_from(wait.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::MAX);
        let ready: Vec<(u8, PollFlags)> = match poll(&mut fds, timeout) {
            Ok(_) => fds
                .iter()
                .zip(&slots)
                .map(|(f, s)| (*s, f.revents().unwrap_or(PollFlags::empty())))
                .collect(),
            Err(Errno::EINTR) => continue,
            Err(e) => {
                ended.internal_error =
                    Some(format!("poll failed while supervising the sandbox: {e}"));
                kill_all(child, pidfd.as_ref(), cgroup);
                killed = true;
                Vec::new()
            }
        };
        drop(fds);

        for (slot, rev) in ready {
            if rev.is_empty() {
                continue;
            }
            match slot {
                b'o' | b'e' => {
                    let (pipe, cap): (&mut Option<OwnedFd>, &mut Capture) = if slot == b'o' {
                        (&mut out, &mut ended.stdout)
                    } else {
                        (&mut err, &mut ended.stderr)
                    };
                    let Some(fd) = pipe.as_ref() else { continue };
                    match read(fd, &mut buf) {
                        Ok(0) => *pipe = None,
                        Ok(n) => {
                            // Pass-through keeps only stderr's last words (see the constant).
                            let tail = spec.passthrough.then_some(if slot == b'o' {
                                0
                            } else {
                                PASSTHROUGH_STDERR_TAIL
                            });
                            let kept = cap.push(&buf[..n], limits.output, tail);
                            if let Some(e) = &mut events {
                                e.add(slot == b'e', &buf[..kept]);
                            }
                            if kept < n && !killed {
                                ended.output_limited = true;
                                killed = true;
                                stopper.stop(child, pidfd.as_ref(), cgroup);
                            }
                        }
                        Err(Errno::EINTR | Errno::EAGAIN) => {}
                        Err(_) => *pipe = None,
                    }
                }
                b'O' => ended.stdout.passed.flush_some(host_out),
                b'E' => ended.stderr.passed.flush_some(host_err),
                b'V' => {
                    if let Some(e) = &mut events {
                        e.lines.flush_some(host_out);
                    }
                }
                b'r' => {
                    let Some(fd) = rep.as_ref() else { continue };
                    match read(fd, &mut buf) {
                        Ok(0) => rep = None,
                        Ok(n) => {
                            for m in reader.feed(&buf[..n]) {
                                if spec.collect.is_some()
                                    && !collecting
                                    && matches!(m, Msg::Exited { .. } | Msg::Signaled { .. })
                                {
                                    collecting = true;
                                    stopper.start_grace(Grace::Collecting);
                                }
                                if let Some(m) = ended.collected.take(m) {
                                    ended.msgs.push(m);
                                }
                            }
                        }
                        Err(Errno::EINTR | Errno::EAGAIN) => {}
                        Err(_) => rep = None,
                    }
                }
                b'p' => {
                    init_exited = true;
                    match sys::wait4(child) {
                        Ok((status, ru)) => {
                            ended.init_status = Some(status);
                            let tv = |t: libc::timeval| {
                                Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000)
                            };
                            ended.rusage_cpu = Some(tv(ru.ru_utime) + tv(ru.ru_stime));
                            ended.rusage_maxrss = Some(ru.ru_maxrss as u64 * 1024);
                        }
                        Err(e) => {
                            ended.internal_error =
                                Some(format!("cannot reap the sandbox's init: {e}"))
                        }
                    }
                    ended.wall = started.elapsed();
                }
                b's' => {
                    if let Some(s) = &sfd
                        && let Ok(Some(info)) = s.read_signal()
                    {
                        ended.interrupted = Signal::try_from(info.ssi_signo as i32).ok();
                        if !killed {
                            killed = true;
                            stopper.stop(child, pidfd.as_ref(), cgroup);
                        }
                    }
                }
                b'm' => {
                    let (Some(sock), Some(w)) = (&watch_sock, watch.as_mut()) else {
                        continue;
                    };
                    match super::memwatch::receive_proc(sock) {
                        // The payload's listener comes next, before it execs.
                        Ok(Some(Received::Handover(h))) => {
                            if let Err(e) = w.arm(h, Instant::now()) {
                                w.report.error = Some(e);
                                if !killed {
                                    killed = true;
                                    stopper.stop(child, pidfd.as_ref(), cgroup);
                                }
                            }
                        }
                        // The listener comes after init's hand-over: a watch never armed would
                        // count nothing.
                        Ok(Some(Received::Listener(fd))) if w.armed() => {
                            watch_sock = None;
                            w.set_listener(fd);
                        }
                        Ok(Some(Received::Listener(_))) => {
                            watch_sock = None;
                            w.report.error = Some(
                                "the sandbox's payload sent the memory watch's seccomp listener before init sent its /proc; the memory limit cannot be enforced".into(),
                            );
                            if !killed {
                                killed = true;
                                stopper.stop(child, pidfd.as_ref(), cgroup);
                            }
                        }
                        Ok(None) => {}
                        // init is dying or gone (killed from outside before its hand-over):
                        // its channel's end says nothing of the watch. The run ends with init,
                        // which the result names as the cause.
                        Err(_) if ended.init_status.is_some() || super::is_exiting(child) => {
                            watch_sock = None
                        }
                        Err(e) => {
                            watch_sock = None;
                            w.report.error = Some(e);
                            if !killed {
                                killed = true;
                                stopper.stop(child, pidfd.as_ref(), cgroup);
                            }
                        }
                    }
                }
                b'n' => {
                    let Some(w) = watch.as_mut() else { continue };
                    if !rev.contains(PollFlags::POLLIN) {
                        // Every process under the filter has exited.
                        w.close_listener();
                        continue;
                    }
                    if let Some(why) = w.notified() {
                        if w.report.error.is_none() && !w.report.over {
                            w.report.error = Some(why);
                        }
                        if !killed {
                            killed = true;
                            stopper.stop(child, pidfd.as_ref(), cgroup);
                        }
                    }
                }
                b'i' => {
                    let StdinState::Source(src) = &stdin_state else {
                        continue;
                    };
                    match read(src.fd(), &mut buf) {
                        Ok(0) => stdin_state = StdinState::Closed,
                        Ok(n) => stdin_buf.extend_from_slice(&buf[..n]),
                        Err(Errno::EINTR | Errno::EAGAIN) => {}
                        Err(_) => stdin_state = StdinState::Closed,
                    }
                }
                b'w' => {
                    let Some(p) = stdin_pipe.as_ref() else {
                        continue;
                    };
                    match write(p, &stdin_buf) {
                        Ok(n) => {
                            stdin_buf.drain(..n);
                        }
                        Err(Errno::EINTR | Errno::EAGAIN) => {}
                        // The program closed its stdin: stop feeding it.
                        Err(_) => {
                            stdin_buf.clear();
                            stdin_state = StdinState::Closed;
                            stdin_pipe = None;
                        }
                    }
                }
                _ => {}
            }
        }
        // The reader of cordon's stdout (or stderr) is gone (`cordon exec -- CMD | head -1`):
        // as with a pipe straight from the program, its next write there fails (EPIPE, and
        // SIGPIPE unless it ignores that), rather than the rest being read and dropped until
        // the timeout or the output limit ends the run. With `--stream` both go to stdout.
        let stream_gone = events.as_ref().is_some_and(|e| e.lines.reader_gone);
        if ended.stdout.passed.reader_gone || stream_gone {
            out = None;
        }
        if ended.stderr.passed.reader_gone || stream_gone {
            err = None;
        }

        // The CPU-time limit, for the sandbox as a whole, from the cgroup's counter.
        if let (Some(limit), Some(cg)) = (limits.cpu_time, cgroup)
            && !killed
            && !init_exited
            && !collecting
            && cg.metrics().cpu_time.is_some_and(|t| t > limit)
        {
            ended.cpu_timed_out = true;
            killed = true;
            stopper.stop(child, pidfd.as_ref(), cgroup);
        }

        // The memory limit under the rlimit backend: the sandbox's memory, polled.
        if !killed
            && !init_exited
            && let Some(w) = watch.as_mut()
        {
            match w.poll(Instant::now()) {
                None | Some(Verdict::Under) => {}
                Some(Verdict::Over(_)) => {
                    w.report.over = true;
                    killed = true;
                    stopper.stop(child, pidfd.as_ref(), cgroup);
                }
                Some(Verdict::Blind(why)) => {
                    w.report.error = Some(why);
                    killed = true;
                    stopper.stop(child, pidfd.as_ref(), cgroup);
                }
            }
        }
    }
    ended.memory_watch = watch.map(|w| w.report);
    ended.grace_expired = stopper.expired.then_some(stopper.grace_cause).flatten();
    if ended.wall.is_zero() {
        ended.wall = started.elapsed();
    }
    // The sandbox is gone: what is left for a slow reader of cordon is written out now, with
    // blocking writes (as any filter in a pipeline would); nothing is left to supervise.
    let cut = [ended.stdout.truncated, ended.stderr.truncated];
    let mut event_lines = events.map(|mut e| {
        e.finish(cut);
        e
    });
    ended.stdout.passed.drain(host_out);
    ended.stderr.passed.drain(host_err);
    if let Some(e) = &mut event_lines {
        e.lines.drain(host_out);
    }
    ended
}

/// cordon's own stdout or stderr (`fd`) reopened non-blocking when it is a terminal, for the
/// supervisor's pass-through writes; None otherwise (fd itself is written then). A write to
/// a terminal blocks until the terminal has taken all of it, which polling writable does not
/// promise (a pipe that polls writable takes PIPE_BUF bytes at once): a terminal that stopped
/// being read (a pager, `ssh -t`, an agent's pseudo-terminal) held the supervisor in `write`,
/// with the timeout and the memory watch, while the sandbox ran on past both. The reopened
/// file is an open file description of its own: the caller's terminal keeps its flags.
fn terminal_sink(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    if !nix::unistd::isatty(fd).unwrap_or(false) {
        return None;
    }
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    // A terminal's master side (`ptmx`) opened again is a new terminal: written as it is.
    let link = std::fs::read_link(&path).ok()?;
    if link.file_name().is_some_and(|n| n == "ptmx") {
        return None;
    }
    nix::fcntl::open(
        path.as_str(),
        nix::fcntl::OFlag::O_WRONLY
            | nix::fcntl::OFlag::O_NONBLOCK
            | nix::fcntl::OFlag::O_NOCTTY
            | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()
}

/// SIGKILL to init takes the whole pid namespace with it (stopped processes included); the
/// cgroup kill also covers anything the cgroup holds. Through init's pidfd when there is one:
/// once init has been reaped (a limit passed while its output drains), its pid may be
/// another process's, and the pidfd signals nothing then.
fn kill_all(child: Pid, pidfd: Option<&OwnedFd>, cgroup: Option<&Cgroup>) {
    match pidfd {
        Some(fd) => {
            let _ = sys::pidfd_kill(fd.as_fd(), libc::SIGKILL);
        }
        // Only before init is watched (no pidfd: it is never reaped, so its pid stays its own).
        None => {
            let _ = kill(child, Signal::SIGKILL);
        }
    }
    if let Some(cg) = cgroup {
        cg.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines `Events` writes for `pieces` (stdout when the flag is false), `finish`
    /// included.
    fn lines(encoding: OutputEncoding, pieces: &[(bool, &[u8])]) -> Vec<String> {
        let mut e = Events::new(encoding, None);
        for (err, bytes) in pieces {
            e.add(*err, bytes);
        }
        e.finish([false, false]);
        String::from_utf8(e.lines.bytes)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_character_cut_between_reads_is_streamed_whole() {
        let e = "é".as_bytes();
        let euro = "€".as_bytes();
        let got = lines(
            OutputEncoding::Utf8,
            &[
                (false, b"a\n"),
                (false, &[b'x', e[0]]),
                (true, &euro[..2]),
                (false, &[e[1], b'y']),
                (true, &euro[2..]),
                // Not UTF-8 (no character starts with 0xff), and a start never completed.
                (false, b"\xff!"),
                (true, &euro[..1]),
            ],
        );
        assert_eq!(
            got,
            [
                r#"{"stdout":"a\n"}"#,
                r#"{"stdout":"x"}"#,
                r#"{"stdout":"éy"}"#,
                r#"{"stderr":"€"}"#,
                r#"{"stdout":"\ufffd!"}"#.replace("\\ufffd", "\u{fffd}").as_str(),
                r#"{"stderr":"\ufffd"}"#.replace("\\ufffd", "\u{fffd}").as_str(),
            ]
        );
        // base64 pieces are the exact bytes, cut where the reads cut them.
        let got = lines(
            OutputEncoding::Base64,
            &[(false, &[b'x', e[0]]), (false, &e[1..])],
        );
        assert_eq!(got, [r#"{"stdout":"eMM="}"#, r#"{"stdout":"qQ=="}"#]);
        // A character the output limit cut is left out, as the result's text leaves it.
        let mut cut = Events::new(OutputEncoding::Utf8, None);
        cut.add(false, &[b'x', e[0]]);
        cut.add(true, &[b'y', e[0]]);
        cut.finish([true, false]);
        let text = String::from_utf8(cut.lines.bytes).unwrap();
        assert_eq!(
            text,
            "{\"stdout\":\"x\"}\n{\"stderr\":\"y\"}\n{\"stderr\":\"\u{fffd}\"}\n"
        );
    }

    /// A compile's or an install's pieces come inside an object named after the phase.
    #[test]
    fn a_phases_pieces_are_wrapped_in_its_name() {
        let mut e = Events::new(OutputEncoding::Utf8, Some("compile"));
        e.add(true, b"warning\n");
        e.add(false, b"ok");
        e.finish([false, false]);
        let text = String::from_utf8(e.lines.bytes).unwrap();
        assert_eq!(
            text,
            "{\"compile\":{\"stderr\":\"warning\\n\"}}\n{\"compile\":{\"stdout\":\"ok\"}}\n"
        );
    }
}

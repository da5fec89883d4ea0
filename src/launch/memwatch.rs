//! The memory watch of the rlimit backend: without a cgroup, nothing in the kernel bounds the
//! sandbox's memory as a whole (RLIMIT_DATA is per process and ignores shared memory), so the
//! supervisor polls it. Each sample lists the sandbox's processes in the sandbox's own procfs
//! (init hands cordon a descriptor of it, see [`send_proc`]), and sums for every process but
//! init:
//!
//! - `Pss_Anon + Pss_Shmem + SwapPss` from `/proc/PID/smaps_rollup`: private and shared
//!   anonymous memory, memfd, SysV and tmpfs pages mapped in its page tables, each shared page
//!   divided among the processes that map it (so it is counted once over the sandbox);
//! - every memfd held open by a descriptor (`/proc/PID/fd/*` → `/memfd:…`), once per inode:
//!   its allocated size (`st_blocks * 512`), less what the mappings of that inode already
//!   counted (so a memfd filled with write() and never mapped counts in full). Under the
//!   watch the payload cannot make memfds (memfd_create and memfd_secret answer ENOSYS,
//!   `profiles/seccomp/memory-watch.toml`): one kept only by a partial mapping or by a
//!   descriptor in flight in a socket's queue would be out of sight, and secret memory is not
//!   in any Pss field. This count remains for defence in depth;
//! - every shmem object mapped shared that no descriptor shows (a shared anonymous mapping,
//!   `MAP_SHARED|MAP_ANONYMOUS`; found by the device of the kernel's shmem
//!   mount in `/proc/PID/maps`, which walks no page table), at the furthest offset any mapping
//!   of it reaches, less what its mappings counted: `madvise(MADV_DONTNEED)` drops pages from
//!   the page tables, not from the object, and an unprivileged caller cannot measure the
//!   object itself (its `/proc/PID/map_files` entry needs CAP_CHECKPOINT_RESTORE in the initial
//!   user namespace). So a 1 GiB shared mapping counts 1 GiB however little of it is touched,
//!   as RLIMIT_AS would count it. A mapping cut down (munmap, mremap) leaves the rest in the
//!   object: the object keeps the largest size it was counted at while a mapping of it
//!   remains ([`MemWatch::object_sizes`]). A mapping made, filled and cut down between two
//!   samples is never seen whole: its creation is (see "Creations" below);
//! - every SysV shm segment of the sandbox's IPC namespace, at its resident + swapped size
//!   (init also hands over its open `/proc/sysvipc/shm`, which lists the segments of the IPC
//!   namespace it was opened in), less what mappings of it already counted (a segment a
//!   process touched and detached keeps its pages, mapped nowhere); and every message queue
//!   (its queued text and message headers) and semaphore set (per semaphore) of that
//!   namespace, kernel memory that `/proc/sysvipc/msg` and `sem` show (a 32000-semaphore set
//!   costs 2 MiB: 200 of them held 405 MiB unseen before they were counted);
//! - the kernel's own memory for what the sandbox's descriptors hold: each pipe or FIFO at
//!   its whole buffer, each epoll instance's watched items (its `fdinfo` lists them), and the
//!   data queued on its sockets (see `launch::sockdiag`);
//! - the used size of the sandbox's writable tmpfs mounts (`/tmp`, `/dev/shm`, `/workspace`,
//!   and the export directory of an install, `/deps`: init hands over a descriptor of each),
//!   less what mappings of their files counted. A
//!   cgroup charges tmpfs pages to the sandbox too.
//!
//! Full `/proc/PID/smaps` (a page-table walk) is read only for processes with shared memory
//! mapped (`Pss_Shmem` above 0), to subtract what their mappings of the objects above already
//! counted; `/proc/PID/maps` is read for every process.
//!
//! init itself is not counted: it is cordon's own code, runs nothing of the program's, holds a
//! fixed few hundred KiB, and (non-dumpable) cannot be read by an unprivileged caller.
//!
//! A process whose main thread exited (`exit`, not `exit_group`) while others run shows no
//! memory under /proc/PID: it is read through a live thread's /proc/PID/task/TID (one address
//! space for all). (A thread made without CLONE_FILES has a descriptor table of its own, which
//! is not listed; it could hold no memfd: memfd_create answers ENOSYS under the watch.)
//! Not counted: huge pages (MAP_HUGETLB, SHM_HUGETLB), which are in no Pss field; they come
//! only from the pool the host's administrator reserves (`vm.nr_hugepages`, 0 by default).
//!
//! # Creations
//!
//! Under the watch, the memory-watch seccomp filter (`profiles/seccomp/memory-watch.toml`)
//! stops every mmap with MAP_SHARED|MAP_ANONYMOUS in a user notification. The payload installs
//! it with a listener, which it sends to cordon over init's handover socket ([`send_listener`])
//! before it execs; the supervisor polls the listener with everything else and, in
//! [`MemWatch::notified`], records the call's length with the number of complete samples so
//! far, then lets it go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Nothing else is shown: private
//! and file mappings, munmap, mremap and the rest run at full speed, and a program's start
//! makes no shared anonymous mapping. The one file whose shared mapping would also make such
//! an object, /dev/zero, is the host's /dev/full in the sandbox under the watch (it reads the
//! same zeros and cannot be mapped: `fs::plan::watch_devices`), since a notification shows a
//! descriptor only as a number, which another thread can point elsewhere before the kernel
//! reads it. A shared anonymous object's size is fixed when it is made (faults past it get
//! SIGBUS, however its mapping is grown), so its creation's length bounds what it can ever
//! hold, however its mappings are cut down later.
//!
//! Each sample notes the complete sample in which every shmem object shown only by mappings
//! first appeared. A process cannot take such an object except by being forked with it, and
//! a sample lists the sandbox's processes again until no new one shows up, so an alive object
//! is in every complete sample from the first after its creation (or the next one, if the
//! creating thread had not finished its mmap when the first read its mappings:
//! [`CREATION_WINDOW`]). Which creation made which object is not known (an object shows only
//! its inode, a creation only its arguments), so the objects alive count at the largest total
//! any pairing of them with distinct creations in their windows gives ([`creation_bound`]):
//! never less than what they hold, and, for a program that makes and frees shared buffers all
//! the time, each alive one at about the largest buffer made around its time, not the sum of
//! all. An object that no creation can have made blinds the watch, and the sandbox is killed
//! (fail closed). If cordon is gone, the listener is closed and such calls fail with ENOSYS.
//!
//! A process whose memory cannot be read (`EACCES`: only before the payload's exec, or after an
//! exec of a binary the sandbox may not read) is tolerated for [`UNREADABLE_GRACE`]; past it the
//! watch reports itself blind and the supervisor kills the sandbox (fail closed). A process whose
//! descriptors cannot be listed (it made itself non-dumpable, and the caller is unprivileged),
//! or that holds a /proc file whose buffer cannot be sized (an `fdinfo` file whose epoll is
//! gone), ends the run the same way after [`HIDDEN_FDS_SAMPLES`] samples in a row. Those graces are
//! also bounded for the sandbox as a whole ([`SANDBOX_WINDOW`]), so that short-lived
//! processes taking turns cannot each hide within their own.

use crate::sys;
use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use std::collections::{HashMap, HashSet};
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// The poll interval for the first [`BACKOFF_AFTER`] of the run (most bombs go off at once).
pub const FIRST_INTERVAL: Duration = Duration::from_millis(20);
/// The poll interval after that.
pub const LATER_INTERVAL: Duration = Duration::from_millis(50);
pub const BACKOFF_AFTER: Duration = Duration::from_secs(1);
/// In how many consecutive samples a process may hide its descriptors, or hold a /proc file
/// whose buffer cannot be sized, before the watch calls itself blind. Not one: for an instant
/// while a process execs (its new memory is still non-dumpable) or exits (its memory is gone
/// first), the kernel hides its descriptors too; and a program may read a file of /proc just
/// as what it describes goes.
pub const HIDDEN_FDS_SAMPLES: u32 = 2;
/// How long a process's memory may stay unreadable before the watch calls itself blind.
pub const UNREADABLE_GRACE: Duration = Duration::from_secs(1);
/// The grace of one process is not enough: a process that forks and exits before the next
/// sample hands what it holds to a new pid, with a fresh grace, forever. So the watch also
/// calls itself blind when, over the last [`SANDBOX_WINDOW`] samples, some process of the
/// sandbox (whichever) hid its descriptors in [`SANDBOX_HIDDEN_FDS_SAMPLES`] of them, or its
/// memory in [`SANDBOX_UNREADABLE_SAMPLES`] (at least [`UNREADABLE_GRACE`] of samples).
pub const SANDBOX_WINDOW: u32 = 64;
pub const SANDBOX_HIDDEN_FDS_SAMPLES: u32 = 8;
pub const SANDBOX_UNREADABLE_SAMPLES: u32 = 50;

/// What one sample found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Under,
    /// The sandbox's memory (bytes) is over the limit.
    Over(u64),
    /// The watch cannot see some process's memory: why, for the result.
    Blind(String),
}

/// What the watch saw over the run, for the result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchReport {
    /// The largest sum seen, in bytes.
    pub peak: u64,
    pub samples: u64,
    /// Shared mappings whose creation the watch was shown (see [`MemWatch::notified`]).
    pub notifications: u64,
    /// The most the sandbox's socket buffers held in one sample (part of `peak`'s sums).
    pub socket_peak: u64,
    /// The most processes and threads one sample saw, the sandbox's init left out (each
    /// process's `Threads:`): under RLIMIT_NPROC, which counts no refusals, what says that the
    /// sandbox was at its `--pids`.
    pub tasks_peak: u64,
    /// The first private writable request shown to the watch (4 MiB or more: mmap, mremap,
    /// mprotect) that RLIMIT_DATA refuses (the caller's `VmData` plus it over the limit), in
    /// bytes: evidence that a program's allocation failure was the memory limit.
    pub refused_request: Option<u64>,
    /// The watch ended the run: the sum exceeded the limit.
    pub over: bool,
    /// The watch could not do its work (why); the supervisor killed the sandbox.
    pub error: Option<String>,
}

pub struct MemWatch {
    limit: u64,
    /// The sandbox's procfs, once init has sent it.
    proc_dir: Option<OwnedFd>,
    /// init's open `/proc/sysvipc/shm`, `msg` and `sem` (they list the sandbox's IPC
    /// namespace).
    sysv: Option<[std::fs::File; 3]>,
    /// The pipes cordon made for the sandbox (stdio, reports), which it drains itself.
    own_pipes: HashSet<ObjectKey>,
    /// A sock_diag socket of the sandbox's network namespace, its dumps' sequence number, and
    /// what a queue whose sender is gone counts for (see `sockdiag::allowance`).
    sockets: Option<(OwnedFd, u32, super::sockdiag::Allowance)>,
    /// The sandbox's `/proc/net/sockstat` and `sockstat6` (init's, in the sandbox's network
    /// namespace): which socket tables need a dump (see `sockdiag::tables_in_use`). None
    /// when they could not be opened: every table is dumped.
    sockstat: Option<[std::fs::File; 2]>,
    /// The sandbox's writable tmpfs mounts, with their device numbers.
    mounts: Vec<(OwnedFd, Object)>,
    /// A writable tmpfs beside [`TMPFS_MOUNTS`]: the export directory (see
    /// `crate::spec::Export`), when the run has one.
    extra_tmpfs: Option<String>,
    /// The device of the kernel's internal shmem mount, where shared anonymous mappings
    /// (and memfds, and SysV segments) have their objects.
    shm_dev: Option<(u32, u32)>,
    /// The size each shmem object shown only by mappings was last counted at (see
    /// [`MemWatch::object_sizes`]), kept while some mapping of it remains.
    known: HashMap<ObjectKey, u64>,
    /// cordon's end of the memory-watch layer's seccomp listener (see [`MemWatch::notified`]).
    listener: Option<OwnedFd>,
    /// The shared mappings' creations shown since (see [`creation_bound`]), kept while an
    /// object they may have made can be alive or still appear.
    creations: Vec<Creation>,
    /// Each shmem object shown only by mappings, with the complete sample it first appeared in.
    appeared: HashMap<ObjectKey, u64>,
    /// How many samples saw every process of the sandbox.
    complete: u64,
    armed_at: Option<Instant>,
    next: Option<Instant>,
    unreadable: HashMap<u32, (Instant, String)>,
    /// Processes whose descriptors were hidden, in how many consecutive samples.
    hidden_fds: HashMap<u32, u32>,
    /// One bit per recent sample (lowest: the latest): some process hid its descriptors in
    /// it; some process's memory was unreadable in it.
    hidden_fds_history: u64,
    unreadable_history: u64,
    /// The most each open /proc file whose buffer is measured (see [`measured_record`]) was
    /// counted at, by its holder's pid and descriptor, while it stays open and readable: a
    /// buffer keeps the size of the longest record read through it.
    proc_held: HashMap<(u32, std::ffi::OsString), u64>,
    pub report: WatchReport,
}

impl MemWatch {
    /// `own_pipes`: cordon's ends of the pipes it made for the sandbox (not counted).
    pub fn new(limit: u64, own_pipes: &[BorrowedFd]) -> MemWatch {
        let own_pipes = own_pipes
            .iter()
            .filter_map(|fd| nix::sys::stat::fstat(fd).ok())
            .map(|st| ObjectKey {
                major: libc::major(st.st_dev),
                minor: libc::minor(st.st_dev),
                ino: st.st_ino,
            })
            .collect();
        MemWatch {
            limit,
            own_pipes,
            extra_tmpfs: None,
            proc_dir: None,
            sysv: None,
            sockets: None,
            sockstat: None,
            mounts: Vec::new(),
            shm_dev: None,
            known: HashMap::new(),
            listener: None,
            creations: Vec::new(),
            appeared: HashMap::new(),
            complete: 0,
            armed_at: None,
            next: None,
            unreadable: HashMap::new(),
            hidden_fds: HashMap::new(),
            hidden_fds_history: 0,
            unreadable_history: 0,
            proc_held: HashMap::new(),
            report: WatchReport::default(),
        }
    }

    /// Also counts the files of the writable tmpfs at `dir` (the export directory), whose
    /// mount init hands over after [`TMPFS_MOUNTS`].
    pub fn watch_extra_tmpfs(&mut self, dir: &str) {
        self.extra_tmpfs = Some(dir.to_string());
    }

    /// Starts watching what init sent (see [`Handover`]); the first sample is one interval
    /// later (the payload has not started yet).
    pub fn arm(&mut self, h: Handover, now: Instant) -> Result<(), String> {
        for fd in h.mounts {
            let st = nix::sys::stat::fstat(&fd)
                .map_err(|e| format!("cannot stat a tmpfs mount of the sandbox: {e}"))?;
            let dev = Object::Fs {
                major: libc::major(st.st_dev),
                minor: libc::minor(st.st_dev),
            };
            self.mounts.push((fd, dev));
        }
        self.shm_dev = Some(shm_dev()?);
        self.sysv = h.sysv.map(|fds| fds.map(std::fs::File::from));
        self.sockets = h.sockets.map(|fd| (fd, 0, super::sockdiag::allowance()));
        if self.sockets.is_some() {
            // pid 1 of the sandbox is init, alive until the end, in its network namespace.
            let open = |name: &str| {
                nix::fcntl::openat(
                    &h.proc_dir,
                    name,
                    nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .ok()
                .map(std::fs::File::from)
            };
            self.sockstat = open("1/net/sockstat")
                .zip(open("1/net/sockstat6"))
                .map(<[_; 2]>::from);
        }
        self.proc_dir = Some(h.proc_dir);
        self.armed_at = Some(now);
        self.next = Some(now + FIRST_INTERVAL);
        Ok(())
    }

    /// Whether init's hand-over armed the watch.
    pub fn armed(&self) -> bool {
        self.armed_at.is_some()
    }

    /// When the next sample is due (None before [`MemWatch::arm`]).
    pub fn due(&self) -> Option<Instant> {
        self.next
    }

    /// Samples if due; returns None when it was not.
    pub fn poll(&mut self, now: Instant) -> Option<Verdict> {
        let next = self.next?;
        if now < next {
            return None;
        }
        let armed = self.armed_at.unwrap_or(now);
        let interval = if now.duration_since(armed) < BACKOFF_AFTER {
            FIRST_INTERVAL
        } else {
            LATER_INTERVAL
        };
        let verdict = self.sample(now);
        self.next = Some(Instant::now() + interval);
        Some(verdict)
    }

    fn sample(&mut self, now: Instant) -> Verdict {
        let Some(dir) = &self.proc_dir else {
            return Verdict::Under;
        };
        let root = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let mut pending = match list_pids(&root) {
            Ok(p) => p,
            Err(why) => return Verdict::Blind(why),
        };
        // The processes alive together at the first listing: only theirs count toward the
        // most threads seen at once (one seen in a later listing may have started after
        // another of the first ended).
        let first_listing: HashSet<u32> = pending.iter().copied().collect();
        self.report.samples += 1;
        let mut total: u64 = 0;
        let mut seen = HashSet::new();
        // Some process hid its descriptors / its memory in this sample.
        let (mut hid_fds, mut unreadable) = (false, false);
        // Processes with shared memory mapped: only their mappings can overlap an object
        // counted at its own size (reading a full smaps costs more than its rollup).
        let mut mapping_shmem = Vec::new();
        // The Pss_Shmem of the processes in `mapping_shmem`.
        let mut takeable = 0u64;
        let mut objects: HashMap<Object, u64> = HashMap::new();
        // The processes' threads, and the sizes of the /proc files they hold open.
        let mut tally = Tally {
            held_before: std::mem::take(&mut self.proc_held),
            ..Tally::default()
        };
        // The extent of every shmem object mapped shared, by object.
        let mut extents: HashMap<ObjectKey, u64> = HashMap::new();
        let shm_dev = self.shm_dev;
        for (fd, dev) in &self.mounts {
            match nix::sys::statfs::fstatfs(fd) {
                Ok(s) => {
                    // (f_bsize is signed under glibc, unsigned under musl.)
                    #[allow(clippy::unnecessary_cast)]
                    let used = s
                        .blocks()
                        .saturating_sub(s.blocks_free())
                        .saturating_mul(s.block_size() as u64);
                    if used > 0 {
                        objects.insert(*dev, used);
                    }
                }
                Err(e) => {
                    return Verdict::Blind(format!(
                        "cannot read the size of the sandbox's tmpfs mounts (fstatfs): {e}"
                    ));
                }
            }
        }
        if let Some([shm, msg, sem]) = &self.sysv {
            // Each table read and parsed; `what` names it in the error.
            fn table<T>(
                f: &std::fs::File,
                what: &str,
                parse: impl Fn(&str) -> Result<T, String>,
            ) -> Result<T, String> {
                read_all_at(f)
                    .map_err(|e| e.to_string())
                    .and_then(|text| parse(&text))
                    .map_err(|e| {
                        format!("cannot read the sandbox's SysV {what} (/proc/sysvipc/{what}): {e}")
                    })
            }
            let tables = table(shm, "shm", sysv_segments).and_then(|segments| {
                Ok((
                    segments,
                    table(msg, "msg", sysv_queue_bytes)?,
                    table(sem, "sem", sysv_semaphore_bytes)?,
                ))
            });
            match tables {
                Ok((segments, queues, semaphores)) => {
                    objects.extend(
                        segments
                            .into_iter()
                            .filter(|(_, b)| *b > 0)
                            .map(|(id, b)| (Object::Sysv(id), b)),
                    );
                    // Message queues and semaphore sets are kernel memory no mapping shows.
                    total = total.saturating_add(queues).saturating_add(semaphores);
                }
                Err(why) => return Verdict::Blind(why),
            }
        }
        // What the sandbox's sockets hold in the kernel (queued data is in no process's memory).
        if let Some((diag, seq, allow)) = &mut self.sockets {
            // Which tables hold a socket (a count that cannot be read: dump them all).
            let in_use = self.sockstat.as_ref().and_then(|[v4, v6]| {
                super::sockdiag::tables_in_use(&read_all_at(v4).ok()?, &read_all_at(v6).ok()?)
            });
            match super::sockdiag::socket_bytes(diag.as_fd(), seq, *allow, in_use) {
                Ok(bytes) => {
                    total = total.saturating_add(bytes);
                    self.report.socket_peak = self.report.socket_peak.max(bytes);
                }
                Err(why) => return Verdict::Blind(why),
            }
        }
        // A process forked after a listing can hold what one read (or gone) before held, and
        // no process can take a shared anonymous object it was not forked with: so the
        // sandbox's /proc is listed again until a listing shows no new process. A sandbox
        // that keeps forking faster than that makes the sample partial (what was known is
        // kept; bounded like other hiding, see `note_hiding`).
        let mut relisted = 0;
        // The sample's CPU so far; without the thread's clock, its wall time (never less, so
        // the budget only gets stricter).
        let (wall_start, cpu_start) = (Instant::now(), thread_cpu());
        let costly = || {
            let spent = match (cpu_start, thread_cpu()) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => wall_start.elapsed(),
            };
            spent > SAMPLE_CPU
        };
        while let Some(pid) = pending.pop().or_else(|| {
            let Ok(listed) = list_pids(&root) else {
                unreadable = true;
                return None;
            };
            let again: Vec<u32> = listed
                .into_iter()
                .filter(|p| *p != 1 && !seen.contains(p))
                .collect();
            if again.is_empty() {
                return None;
            }
            relisted += 1;
            if relisted > RELIST_ROUNDS {
                unreadable = true;
                return None;
            }
            pending = again;
            pending.pop()
        }) {
            if pid == 1 || !seen.insert(pid) {
                continue;
            }
            let threads_before = tally.threads;
            let result = read_process(
                &root,
                pid,
                (shm_dev, self.extra_tmpfs.as_deref()),
                &mut objects,
                &mut extents,
                &mut tally,
            );
            if !first_listing.contains(&pid) {
                tally.threads = threads_before;
            }
            self.report.tasks_peak = self.report.tasks_peak.max(tally.threads);
            if costly() {
                return too_costly(seen.len(), total);
            }
            if !matches!(result, Err(ReadError::Partial { .. })) {
                self.hidden_fds.remove(&pid);
            }
            match result {
                Ok((bytes, shared)) => {
                    self.unreadable.remove(&pid);
                    total = total.saturating_add(bytes);
                    if let SharedPages::Smaps { shared, pss_shmem } = shared {
                        mapping_shmem.push(shared);
                        takeable = takeable.saturating_add(pss_shmem);
                    }
                    // Over the limit already, the rest need not be read (a sandbox with much to
                    // read, thousands of epoll items, is killed as soon as it is over). By the
                    // end of the sample the sum only grows, but for what the objects counted
                    // at their own size take back of the rollups' shared memory: that is left
                    // out of this early test.
                    if total.saturating_sub(takeable) > self.limit {
                        self.report.peak = self.report.peak.max(total);
                        return Verdict::Over(total);
                    }
                }
                Err(ReadError::Gone) => {}
                Err(ReadError::Unreadable(why)) => {
                    tally.keep_held(pid);
                    unreadable = true;
                    let (since, _) = self.unreadable.entry(pid).or_insert((now, why.clone()));
                    if now.duration_since(*since) >= UNREADABLE_GRACE {
                        return Verdict::Blind(format!(
                            "cannot read the memory of the sandbox's process {pid} for {:?} ({why}); the memory limit cannot be enforced on it",
                            UNREADABLE_GRACE
                        ));
                    }
                }
                Err(ReadError::Partial { bytes, uncounted }) => {
                    tally.keep_held(pid);
                    hid_fds = true;
                    total = total.saturating_add(bytes);
                    let n = self.hidden_fds.entry(pid).or_insert(0);
                    *n += 1;
                    if *n >= HIDDEN_FDS_SAMPLES {
                        return Verdict::Blind(uncounted.blind(pid));
                    }
                }
                Err(ReadError::Format(why)) => return Verdict::Blind(why),
            }
        }
        // What the open /proc files were counted at, kept for the next sample (a file
        // closed, or a process gone, drops out).
        self.proc_held = std::mem::take(&mut tally.held);
        self.unreadable.retain(|pid, _| seen.contains(pid));
        self.hidden_fds.retain(|pid, _| seen.contains(pid));
        // cordon's own pipes (the sandbox's stdio) are drained by cordon, not the sandbox's.
        objects.retain(|o, _| !matches!(o, Object::Pipe(k) if self.own_pipes.contains(k)));
        if let Some(why) = self.note_hiding(hid_fds, unreadable) {
            return Verdict::Blind(why);
        }
        let created = match self.object_sizes(&mut objects, extents, hid_fds || unreadable) {
            Ok(extra) => extra,
            Err(why) => return Verdict::Blind(why),
        };
        total = total.saturating_add(created);
        if !objects.is_empty() {
            // What the mappings of these objects already counted, so a page is not counted
            // twice (each process's smaps was read with its rollup; unreadable smaps:
            // nothing subtracted, the object counts in full).
            let mut mapped: HashMap<Object, u64> = HashMap::new();
            for shared in &mapping_shmem {
                for (k, v) in objects_pss(shared, &objects) {
                    *mapped.entry(k).or_default() += v;
                }
            }
            // Each object counts at its own size, and what the rollups counted of it comes
            // out (each process's smaps was read with its rollup, so a process never gives back
            // more than it added). Taking each object's larger figure instead would count a
            // page twice whenever processes' reads, made at different instants, together show
            // more of an object than it ever held at once (one process read before another
            // faulted the pages in, the other after): a program holding 86 MiB was killed at
            // 139 MiB that way. An object that grew while the sample ran is under-counted by
            // that growth until the next sample, like any growth between two samples.
            let own = objects.values().fold(0u64, |t, v| t.saturating_add(*v));
            let shown = mapped.values().fold(0u64, |t, v| t.saturating_add(*v));
            total = total.saturating_add(own).saturating_sub(shown);
        }
        self.report.peak = self.report.peak.max(total);
        if total > self.limit {
            Verdict::Over(total)
        } else {
            Verdict::Under
        }
    }
}

impl MemWatch {
    /// Sizes the shmem objects seen through shared mappings (`extents`: the extent each is
    /// mapped to) into `objects`. One a descriptor shows already has its allocated size
    /// there. One no descriptor shows (a shared anonymous mapping, a memfd whose descriptors
    /// were closed) may hold pages no page table maps: `madvise(MADV_DONTNEED)` drops them
    /// from the page tables, not from the object, and nothing lets an unprivileged caller
    /// measure the object itself (its `/proc/PID/map_files` link needs CAP_CHECKPOINT_RESTORE
    /// in the initial user namespace). It counts at its whole mapped extent (as RLIMIT_AS
    /// would), and at no less than it was counted at before while a mapping of it remains: a
    /// munmap or mremap that shrinks the mapping leaves the pages beyond it in the object.
    /// `partial`: some process could not be read in this sample, so an object no mapping
    /// showed may still be mapped there; what was known is kept.
    ///
    /// A mapping made, filled and cut down between two samples is never seen whole; its
    /// creation was (see "Creations" in the module's documentation): returns what the objects'
    /// creations say they may hold beyond the sizes counted here ([`creation_bound`]), or why
    /// the watch is blind (an object no creation can have made).
    fn object_sizes(
        &mut self,
        objects: &mut HashMap<Object, u64>,
        extents: HashMap<ObjectKey, u64>,
        partial: bool,
    ) -> Result<u64, String> {
        if !partial {
            self.complete += 1;
        }
        // The complete sample this one counts as for objects it shows first (a partial one
        // counts as the next complete one: an object may have been out of sight in it).
        let now = if partial {
            self.complete + 1
        } else {
            self.complete
        };
        let mut known = HashMap::new();
        let mut counted: u64 = 0;
        for (key, extent) in extents {
            let size = match objects.get(&Object::File(key)) {
                Some(by_fd) => *by_fd,
                None => extent.max(self.known.get(&key).copied().unwrap_or(0)),
            };
            objects.insert(Object::File(key), size);
            known.insert(key, size);
            counted = counted.saturating_add(size);
            self.appeared.entry(key).or_insert(now);
        }
        if partial {
            for (k, v) in &self.known {
                known.entry(*k).or_insert(*v);
            }
        } else {
            self.appeared.retain(|k, _| known.contains_key(k));
        }
        self.known = known;
        let appeared: Vec<u64> = self.appeared.values().copied().collect();
        // Creations no alive object can have made, and that no object still to appear can
        // have made either, are of no further use.
        let seen: HashSet<u64> = appeared.iter().copied().collect();
        let complete = self.complete;
        self.creations.retain(|c| {
            c.after + CREATION_WINDOW > complete
                || (c.after + 1..=c.after + CREATION_WINDOW).any(|k| seen.contains(&k))
        });
        match creation_bound(&appeared, &self.creations) {
            Ok(bound) => Ok(bound.saturating_sub(counted)),
            Err(n) => Err(format!(
                "{n} shared memory object(s) appeared in the sandbox's mappings that no mmap shown to the watch can have made (each shared anonymous mapping's creation waits for the watch, and a process holding one is seen in every sample from then on); the memory limit cannot be enforced"
            )),
        }
    }

    /// Records whether some process hid its descriptors / its memory from this sample; the
    /// reason to call the watch blind when that happened too often lately (see
    /// [`SANDBOX_WINDOW`]).
    fn note_hiding(&mut self, hid_fds: bool, unreadable: bool) -> Option<String> {
        self.hidden_fds_history = (self.hidden_fds_history << 1) | u64::from(hid_fds);
        self.unreadable_history = (self.unreadable_history << 1) | u64::from(unreadable);
        let fds = self.hidden_fds_history.count_ones();
        let mem = self.unreadable_history.count_ones();
        if fds >= SANDBOX_HIDDEN_FDS_SAMPLES {
            Some(format!(
                "processes of the sandbox hid their file descriptors in {fds} of the last {SANDBOX_WINDOW} samples (a process that makes itself non-dumpable hides them from an unprivileged caller; short-lived processes taking turns each stay within their own grace), so the memfds they hold cannot be counted"
            ))
        } else if mem >= SANDBOX_UNREADABLE_SAMPLES {
            Some(format!(
                "the memory of processes of the sandbox was unreadable in {mem} of the last {SANDBOX_WINDOW} samples (short-lived processes taking turns each stay within their own grace); the memory limit cannot be enforced on them"
            ))
        } else {
            None
        }
    }
}

/// How many times a sample lists the sandbox's processes again for ones forked meanwhile.
const RELIST_ROUNDS: u32 = 8;

/// The pids in the sandbox's /proc (`root`), init's included.
fn list_pids(root: &str) -> Result<Vec<u32>, String> {
    let entries = std::fs::read_dir(root)
        .map_err(|e| format!("cannot list the sandbox's processes (its /proc): {e}"))?;
    let mut pids = Vec::new();
    for entry in entries {
        // A listing cut short would leave the remaining processes uncounted.
        let entry = entry.map_err(|e| {
            format!("cannot list the sandbox's processes (reading its /proc failed midway): {e}")
        })?;
        if let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

enum ReadError {
    /// The process exited meanwhile (or is a zombie: no memory left).
    Gone,
    Unreadable(String),
    /// Its memory (`bytes`) is readable, but something it holds is not counted. Only
    /// [`HIDDEN_FDS_SAMPLES`] of grace: what it fills goes uncounted meanwhile.
    Partial {
        bytes: u64,
        uncounted: Uncounted,
    },
    /// The kernel's smaps_rollup lacks a field the watch needs.
    Format(String),
}

/// What a process holds that the watch could not count ([`ReadError::Partial`]).
enum Uncounted {
    /// Its descriptors cannot be listed: it made itself non-dumpable
    /// (`prctl(PR_SET_DUMPABLE, 0)`), which hides them from an unprivileged caller, or it is
    /// in the middle of an exec or an exit. A memfd it fills goes uncounted.
    HiddenFds(String),
    /// It holds a /proc file open whose buffer cannot be sized (what it was filled from is
    /// gone).
    UnsizedProcFile(String),
}

impl Uncounted {
    /// Why the memory limit cannot be enforced on process `pid`, once its grace is over.
    fn blind(&self, pid: u32) -> String {
        match self {
            Uncounted::HiddenFds(why) => format!(
                "cannot list the file descriptors of the sandbox's process {pid} ({why}; a process that makes itself non-dumpable hides them from an unprivileged caller), so the memfds it holds cannot be counted"
            ),
            Uncounted::UnsizedProcFile(why) => {
                format!(
                    "the sandbox's process {pid} keeps kernel memory the watch cannot size: {why}"
                )
            }
        }
    }
}

/// Whether the process at `dir` is gone or exiting: no status, a zombie or dead state, or no
/// address space (`VmSize` is shown only while the process has one; a non-dumpable process
/// that hides its descriptors still has its).
fn exiting(dir: &str) -> bool {
    match std::fs::read_to_string(format!("{dir}/status")) {
        Ok(status) => status_says_exiting(&status),
        // Gone. Any other failure keeps the process as one hiding its descriptors (fails
        // closed): the watch must not skip a live process it cannot read.
        Err(e) => matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)),
    }
}

fn status_says_exiting(status: &str) -> bool {
    let state = status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .map(str::trim_start)
        .and_then(|s| s.chars().next());
    match state {
        // A status without a state is not one the watch can read: the process stays one
        // that hides its descriptors (fails closed), never skipped as gone.
        None => false,
        Some('Z' | 'X') => true,
        Some(_) => !status.lines().any(|l| l.starts_with("VmSize:")),
    }
}

fn classify_io(e: &std::io::Error, what: &str) -> ReadError {
    match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::ENOENT | Errno::ESRCH) => ReadError::Gone,
        _ => ReadError::Unreadable(format!("{what}: {e}")),
    }
}

/// What a process's shared memory pages show, read with its rollup (see [`read_process`]).
enum SharedPages {
    /// It maps no shared memory (Pss_Shmem 0).
    None,
    /// The Pss of its shared mappings ([`shared_pss`] of its full smaps, read right after its
    /// rollup): its mappings of the objects counted at their own size are taken out of those
    /// objects (the same instant as the rollup, so a page that moved between the reads is not
    /// counted twice); and the rollup's Pss_Shmem in bytes (the most those can take out of
    /// this process's count).
    Smaps {
        shared: HashMap<SharedKey, u64>,
        pss_shmem: u64,
    },
    /// Its smaps could not be read: nothing is taken out, the objects count in full.
    Unreadable,
}

/// One process's count (its smaps_rollup sum) and its [`SharedPages`]; its memfds go into
/// `objects`, and the extent of its shared mappings of objects on the shmem device `shm_dev`
/// into `extents`.
fn read_process(
    root: &str,
    pid: u32,
    devs: (Option<(u32, u32)>, Option<&str>),
    objects: &mut HashMap<Object, u64>,
    extents: &mut HashMap<ObjectKey, u64>,
    tally: &mut Tally,
) -> Result<(u64, SharedPages), ReadError> {
    tally.pid = pid;
    let dir = format!("{root}/{pid}");
    match read_process_at(root, &dir, devs, objects, extents, tally) {
        // A process whose main thread exited (`exit`, not `exit_group`) lives on in its other
        // threads, but /proc/PID shows no memory for it any more: each live thread's
        // /proc/PID/task/TID does (they share one address space). Without a live thread the
        // process is gone.
        Err(ReadError::Gone) => {
            let tasks = std::fs::read_dir(format!("{root}/{pid}/task"))
                .map_err(|e| classify_io(&e, "task directory"))?;
            for task in tasks {
                let tid = task
                    .map_err(|e| classify_io(&e, "task directory"))?
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok());
                let Some(tid) = tid.filter(|t| *t != pid) else {
                    continue;
                };
                let dir = format!("{root}/{pid}/task/{tid}");
                match read_process_at(root, &dir, devs, objects, extents, tally) {
                    Err(ReadError::Gone) => continue,
                    other => return other,
                }
            }
            Err(ReadError::Gone)
        }
        other => other,
    }
}

/// What one sample adds up beside the memory: the processes' threads, and the size of each
/// `fdinfo` file of the sandbox's /proc that a process holds open (read once a sample).
#[derive(Default)]
struct Tally {
    threads: u64,
    /// By path below /proc: the text's length and the inode the path names (None: it names
    /// nothing now).
    fdinfo: HashMap<Vec<u8>, Option<(u64, u64)>>,
    /// The process being read (set by [`read_process`]).
    pid: u32,
    /// [`MemWatch::proc_held`] as the sample began, and as it finds it.
    held_before: HashMap<(u32, std::ffi::OsString), u64>,
    held: HashMap<(u32, std::ffi::OsString), u64>,
}

impl Tally {
    /// Keeps what `pid`'s open /proc files were counted at for the next sample, where this
    /// one could not read them all (a process cut short must not lose the most its buffers
    /// were seen at, to come back at what they show now).
    fn keep_held(&mut self, pid: u32) {
        for (k, v) in &self.held_before {
            if k.0 == pid {
                self.held.entry(k.clone()).or_insert(*v);
            }
        }
    }
}

/// [`read_process`] through one /proc directory of the process (`dir`: /proc/PID, or one of
/// its threads' /proc/PID/task/TID; `root`: the sandbox's /proc).
fn read_process_at(
    root: &str,
    dir: &str,
    (shm_dev, extra_tmpfs): (Option<(u32, u32)>, Option<&str>),
    objects: &mut HashMap<Object, u64>,
    extents: &mut HashMap<ObjectKey, u64>,
    tally: &mut Tally,
) -> Result<(u64, SharedPages), ReadError> {
    let text = std::fs::read_to_string(format!("{dir}/smaps_rollup"))
        .map_err(|e| classify_io(&e, "smaps_rollup"))?;
    if text.is_empty() {
        // A process without memory (exiting).
        return Err(ReadError::Gone);
    }
    let pss_shmem = kb_field(&text, "Pss_Shmem")
        .unwrap_or(0)
        .saturating_mul(1024);
    let shared = if pss_shmem > 0 {
        match std::fs::read_to_string(format!("{dir}/smaps")) {
            Ok(smaps) if !smaps.is_empty() => SharedPages::Smaps {
                shared: shared_pss(&smaps),
                pss_shmem,
            },
            Ok(_) => return Err(ReadError::Gone),
            Err(e) => match classify_io(&e, "smaps") {
                ReadError::Gone => return Err(ReadError::Gone),
                _ => SharedPages::Unreadable,
            },
        }
    } else {
        SharedPages::None
    };
    let bytes = rollup_bytes(&text).ok_or_else(|| {
        ReadError::Format(format!(
            "the kernel's /proc/PID/smaps_rollup has no {} field (Linux 5.x or later has them): the memory watch cannot count shared memory",
            ROLLUP_FIELDS.join("/")
        ))
    })?;
    // The process's page tables (VmPTE): kernel memory a program makes by touching one byte
    // every 2 MiB of a large region, which shows no resident memory when only read.
    let status =
        std::fs::read_to_string(format!("{dir}/status")).map_err(|e| classify_io(&e, "status"))?;
    let bytes = bytes.saturating_add(kb_field(&status, "VmPTE").unwrap_or(0).saturating_mul(1024));
    let threads = thread_count(&status);
    // maps, not smaps: listing the mappings walks no page table.
    let maps =
        std::fs::read_to_string(format!("{dir}/maps")).map_err(|e| classify_io(&e, "maps"))?;
    shared_mappings(&maps, shm_dev, extents);
    // Each mapping is kernel memory too (its vm_area_struct and tree node): alternating
    // mprotect of one region makes up to vm.max_map_count (65530) of them per process, 16 MiB
    // that no page shows.
    let bytes = bytes.saturating_add((maps.lines().count() as u64).saturating_mul(MAPPING_BYTES));
    let fd_dir = format!("{dir}/fd");
    // A descriptor the watch cannot name may be a memfd: not skipped, the process counts
    // as hiding its descriptors (as when the whole list is refused).
    // A process that began to exit since its memory was read has no address space any more,
    // and the kernel then shows its fd directory as root's (EACCES for an unprivileged
    // caller): it is closing its descriptors, not hiding them. A fork bomb's failing shells
    // exit by the hundred, and were taken for hiding ones.
    let hidden = |e: &std::io::Error, what: &str| match classify_io(e, what) {
        ReadError::Unreadable(_) if exiting(dir) => ReadError::Gone,
        ReadError::Unreadable(why) => ReadError::Partial {
            bytes,
            uncounted: Uncounted::HiddenFds(why),
        },
        other => other,
    };
    let fds = std::fs::read_dir(&fd_dir).map_err(|e| hidden(&e, "fd directory"))?;
    // What the process's epoll instances cost the kernel, and the buffers of the /proc files
    // it holds open.
    let mut epolls = 0u64;
    let mut proc_files = 0u64;
    // The process's mountinfo, read when a descriptor's name is too long to read.
    let mut mountinfo = None;
    for fd in fds {
        let fd = fd.map_err(|e| hidden(&e, "fd directory"))?;
        let path = fd.path();
        let target = match std::fs::read_link(&path) {
            Ok(t) => Some(t),
            // Closed meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            // A path longer than the kernel's page-sized buffer: a file deep in one of the
            // sandbox's directories, never a pipe or a memfd, whose names are short. Its
            // mount tells where it is: on a tmpfs it is stat'ed below (it may be a FIFO);
            // elsewhere it is not, as for any other file (a slow filesystem must not stall
            // the supervisor).
            Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
                match on_tmpfs_mount(dir, &fd.file_name(), &mut mountinfo) {
                    Ok(true) => None,
                    Ok(false) => continue,
                    // Closed meanwhile.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                    Err(e) => return Err(hidden(&e, "a descriptor's mount")),
                }
            }
            Err(e) => return Err(hidden(&e, "a descriptor's link")),
        };
        let link = target
            .as_ref()
            .map_or(&b""[..], |t| t.as_os_str().as_encoded_bytes());
        // A file of the sandbox's /proc: while it is open the kernel keeps the buffer its
        // last read filled (a seq_file's, charged to a cgroup but in no process's memory),
        // one record long, doubled from a page until the record fits. Most records are a
        // line or one mapping's block; an `fdinfo` file's is the whole text, which an epoll
        // or inotify instance makes as long as its items (64 KiB each for 800 items, opened
        // 900 times by each of 20 processes: 1.1 GiB under a 128 MiB limit before this).
        if let Some(rest) = link.strip_prefix(b"/proc/") {
            // A /proc entry found to name nothing any more (its descriptor closed, its
            // process exited) by any lookup since the file was opened reads "… (deleted)".
            let (rest, unhashed) = match rest.strip_suffix(b" (deleted)") {
                Some(r) => (r, true),
                None => (rest, false),
            };
            let record = if measured_record(rest) {
                // The path's text and the inode it names now, read once a sample.
                let named = match tally.fdinfo.get(rest) {
                    _ if unhashed => None,
                    Some(n) => *n,
                    None => {
                        let named_path = format!("{root}/{}", String::from_utf8_lossy(rest));
                        let n = match read_with_inode(&named_path) {
                            Ok(n) => Some(n),
                            // Its descriptor or process is gone.
                            Err(e)
                                if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) =>
                            {
                                None
                            }
                            Err(e) => return Err(hidden(&e, "an open fdinfo file")),
                        };
                        tally.fdinfo.insert(rest.to_vec(), n);
                        n
                    }
                };
                // The held file is the one the path names only if their inodes agree (a
                // pid or descriptor number taken again since names another).
                let now = match named {
                    Some((len, ino)) => match std::fs::metadata(&path) {
                        Ok(m) => (m.ino() == ino).then_some(len),
                        // Closed meanwhile.
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                        Err(e) => return Err(hidden(&e, "an open /proc file")),
                    },
                    None => None,
                };
                // What filled the buffer is gone: the buffer stays as long as the file is
                // open, and its size is unknown. Not taken from an earlier sample either: the
                // holder may have read it again, after the epoll grew, just before the epoll
                // went (or put at the same descriptor another file on the same path, read
                // while a bigger epoll had the number).
                let Some(now) = now else {
                    return Err(ReadError::Partial {
                        bytes,
                        uncounted: Uncounted::UnsizedProcFile(format!(
                            "it holds /proc/{} open, whose descriptor or process is gone, so the kernel buffer the file keeps cannot be sized",
                            String::from_utf8_lossy(rest)
                        )),
                    });
                };
                // While it can be read, the most it was seen at: the buffer keeps the size of
                // the longest record read through it.
                let key = (tally.pid, fd.file_name());
                let record = now.max(tally.held_before.get(&key).copied().unwrap_or(0));
                tally.held.insert(key, record);
                record
            } else {
                0
            };
            proc_files = proc_files.saturating_add(seq_buffer_bytes(record));
            continue;
        }
        if link == b"anon_inode:[eventpoll]" {
            let items = epoll_bytes(dir, &fd.file_name())
                .map_err(|e| hidden(&e, "an epoll instance's fdinfo"))?;
            epolls = epolls.saturating_add(items);
            continue;
        }
        // A pipe or a memfd must be sized; a file on the sandbox's tmpfs mounts, where it can
        // make FIFOs, may be one (whose buffer is a pipe's). Other files are not stat'ed: a
        // slow filesystem must not stall the supervisor.
        let what = match link {
            _ if target.is_none() => None,
            l if l.starts_with(b"pipe:") => Some("a pipe"),
            l if is_memfd(l) => Some("a memfd"),
            l if on_tmpfs(l, extra_tmpfs) => None,
            _ => continue,
        };
        match std::fs::metadata(&path) {
            Ok(m) => {
                let key = ObjectKey {
                    major: libc::major(m.dev()),
                    minor: libc::minor(m.dev()),
                    ino: m.ino(),
                };
                if std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()) {
                    objects.insert(Object::Pipe(key), PIPE_BYTES);
                } else if is_memfd(link) {
                    objects.insert(Object::File(key), m.blocks().saturating_mul(512));
                }
            }
            // Closed meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => {
                if let Some(what) = what {
                    return Err(classify_io(&e, what));
                }
                // Another file: only a FIFO would count, and one the sandbox made (on its
                // tmpfs) can always be stat'ed.
            }
        }
    }
    // Counted once the whole process was read (a read that ends as gone, and is then read
    // through a thread's directory, counts once).
    tally.threads = tally.threads.saturating_add(threads);
    Ok((
        bytes.saturating_add(epolls).saturating_add(proc_files),
        shared,
    ))
}

/// Whether the buffer of a /proc file (a path below /proc) is sized by reading it: one whose
/// one record is its whole text, which can pass two pages. An `fdinfo` file (an epoll's or
/// inotify's lists every item); `stat` and `softirqs`, a line a CPU.
fn measured_record(rest: &[u8]) -> bool {
    is_fdinfo(rest) || rest == b"stat" || rest == b"softirqs"
}

/// Whether a path below /proc (`PID/fdinfo/FD`, or `PID/task/TID/fdinfo/FD`) is an `fdinfo`
/// file.
fn is_fdinfo(rest: &[u8]) -> bool {
    let parts: Vec<&[u8]> = rest.split(|b| *b == b'/').collect();
    let num = |p: &[u8]| !p.is_empty() && p.iter().all(u8::is_ascii_digit);
    match parts.as_slice() {
        [pid, b"fdinfo", fd] => num(pid) && num(fd),
        [pid, b"task", tid, b"fdinfo", fd] => num(pid) && num(tid) && num(fd),
        _ => false,
    }
}

/// The length of the text of the file at `path` and its inode number.
fn read_with_inode(path: &str) -> std::io::Result<(u64, u64)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let ino = f.metadata()?.ino();
    let mut text = Vec::new();
    f.read_to_end(&mut text)?;
    Ok((text.len() as u64, ino))
}

/// The buffer a /proc file open for reading may hold, for a record of `record` bytes: a page
/// doubled until the record fits, and never less than two pages (a line of a mapping's path
/// can take a page of its own).
pub fn seq_buffer_bytes(record: u64) -> u64 {
    record
        .max(2 * PAGE)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX)
}

/// The smaps_rollup fields the watch adds up.
const ROLLUP_FIELDS: [&str; 3] = ["Pss_Anon", "Pss_Shmem", "SwapPss"];

/// `Pss_Anon + Pss_Shmem + SwapPss` of a smaps_rollup text, in bytes; None when a field is
/// missing.
pub fn rollup_bytes(text: &str) -> Option<u64> {
    let mut sum = 0u64;
    for field in ROLLUP_FIELDS {
        sum += kb_field(text, field)? * 1024;
    }
    Some(sum)
}

/// The value of a `Name:   123 kB` line.
/// A /proc/PID/status's `Threads:` (1 when it has none: the process itself).
fn thread_count(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:")?.trim().parse().ok())
        .unwrap_or(1)
}

fn kb_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// A readlink target naming a memfd (`/memfd:NAME (deleted)`).
pub fn is_memfd(target: &[u8]) -> bool {
    target.starts_with(b"/memfd:")
}

/// Whether a descriptor's link names a file on one of [`TMPFS_MOUNTS`] or on `extra` (the
/// export directory).
fn on_tmpfs(link: &[u8], extra: Option<&str>) -> bool {
    TMPFS_MOUNTS.iter().copied().chain(extra).any(|m| {
        link.strip_prefix(m.as_bytes())
            .is_some_and(|rest| rest.starts_with(b"/"))
    })
}

/// Whether descriptor `fd` of the process at `dir` is on a tmpfs: its `mnt_id` (fdinfo) looked
/// up in the process's mountinfo (read once into `mountinfo`). A mount missing from the
/// mountinfo is none of the sandbox's tmpfs mounts.
fn on_tmpfs_mount(
    dir: &str,
    fd: &std::ffi::OsStr,
    mountinfo: &mut Option<String>,
) -> std::io::Result<bool> {
    let info = std::fs::read_to_string(format!("{dir}/fdinfo/{}", fd.to_string_lossy()))?;
    let Some(id) = info
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .map(str::trim)
    else {
        return Err(std::io::Error::other(
            "no mnt_id in the descriptor's fdinfo",
        ));
    };
    if mountinfo.is_none() {
        *mountinfo = Some(std::fs::read_to_string(format!("{dir}/mountinfo"))?);
    }
    Ok(mount_fs_type(mountinfo.as_deref().unwrap_or(""), id) == Some("tmpfs"))
}

/// The filesystem type of mount `id` in a mountinfo text (the first field after ` - `).
fn mount_fs_type<'a>(mountinfo: &'a str, id: &str) -> Option<&'a str> {
    mountinfo.lines().find_map(|l| {
        if l.split(' ').next() != Some(id) {
            return None;
        }
        l.split_once(" - ")?.1.split(' ').next()
    })
}

/// What each item an epoll instance watches costs the kernel (`struct epitem` and its wait
/// queue entry: 2 million items held 381 MiB).
pub const EPOLL_ITEM_BYTES: u64 = 200;

/// The kernel memory of the epoll instance open as descriptor `fd` of the process at `dir`:
/// one `tfd:` line of its `fdinfo` per watched item. (An instance shared by several processes
/// counts in each: forks of an event loop hold a few items, not thousands.)
fn epoll_bytes(dir: &str, fd: &std::ffi::OsStr) -> std::io::Result<u64> {
    let path = format!("{dir}/fdinfo/{}", fd.to_string_lossy());
    match std::fs::read(&path) {
        Ok(info) => Ok(epoll_items(&info).saturating_mul(EPOLL_ITEM_BYTES)),
        // Closed meanwhile.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(0),
        Err(e) => Err(e),
    }
}

/// The items an epoll `fdinfo` text lists.
pub fn epoll_items(info: &[u8]) -> u64 {
    info.split(|b| *b == b'\n')
        .filter(|l| l.starts_with(b"tfd:"))
        .count() as u64
}

/// What a pipe (or FIFO) counts for: its whole buffer, 16 pages (`PIPE_DEF_BUFFERS`; each
/// slot holds at most a page). How much of it is filled cannot be read from outside; a larger
/// buffer cannot be had under the watch (`F_SETPIPE_SZ` answers EPERM, see
/// profiles/seccomp/memory-watch.toml).
pub const PIPE_BYTES: u64 = 16 * 4096;

/// What the kernel keeps for each mapping (`struct vm_area_struct`, its share of the maple
/// tree, anon_vma links): 65,453 mappings made by mprotect took 15.6 MiB of unreclaimable slab.
pub const MAPPING_BYTES: u64 = 256;

/// The CPU one sample may take on the supervisor's thread. Reading a process's mappings costs
/// the kernel time in proportion to their number (a full smaps of 65,000 mappings took 0.5 to
/// 3 s), and while a sample runs nothing else of the supervisor does: forty such processes
/// stalled the watch for 8 s while 2 GiB were held under a 128 MiB limit, and delayed the
/// timeout. A sample that needs more ends the run, saying why (an ordinary sandbox's sample
/// takes a few milliseconds).
pub const SAMPLE_CPU: Duration = Duration::from_secs(1);

/// CPU time of the calling thread (None: the clock could not be read).
fn thread_cpu() -> Option<Duration> {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(Duration::from)
}

/// The verdict of a sample that took more than [`SAMPLE_CPU`].
fn too_costly(read: usize, counted: u64) -> Verdict {
    Verdict::Blind(format!(
        "reading the sandbox's memory took more than {SAMPLE_CPU:?} of CPU in one sample ({read} processes read, {} MiB counted so far): its processes hold so many mappings that the watch could not keep up; the memory limit cannot be enforced on it (a cgroup has no such cost: see `cordon doctor`)",
        counted >> 20
    ))
}

/// A shmem object, as both stat() and a smaps header name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
}

/// A memory object counted at its own size: a memfd (by device and inode), a SysV segment (by
/// shmid, which the kernel uses as the inode number of its `/SYSV…` mapping), a tmpfs mount
/// (by device: every file on it), or a pipe or FIFO held by a descriptor (at [`PIPE_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Object {
    File(ObjectKey),
    Sysv(u64),
    Fs { major: u32, minor: u32 },
    Pipe(ObjectKey),
}

/// `(shmid, rss + swap bytes)` of each segment in a `/proc/sysvipc/shm` text.
pub fn sysv_segments(text: &str) -> Result<Vec<(u64, u64)>, String> {
    Ok(sysv_rows(text, ["shmid", "rss", "swap"])?
        .into_iter()
        .map(|[id, rss, swap]| (id, rss.saturating_add(swap)))
        .collect())
}

/// The rows of a `/proc/sysvipc/*` text: for each, the values of `names` (columns found by
/// the header's names). The kernel always writes the header: a text without it, without one
/// of the columns, or with a row that does not parse is an error (counting such a table as
/// empty would hide what it holds).
fn sysv_rows<const N: usize>(text: &str, names: [&str; N]) -> Result<Vec<[u64; N]>, String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let cols: Vec<&str> = header.split_ascii_whitespace().collect();
    let at = names
        .iter()
        .map(|n| {
            cols.iter()
                .position(|c| c == n)
                .ok_or_else(|| format!("its header has no `{n}` column: {header:?}"))
        })
        .collect::<Result<Vec<usize>, String>>()?;
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_ascii_whitespace().collect();
            let mut row = [0u64; N];
            for (v, &i) in row.iter_mut().zip(&at) {
                *v = f
                    .get(i)
                    .and_then(|x| x.parse().ok())
                    .ok_or_else(|| format!("a row does not parse: {l:?}"))?;
            }
            Ok(row)
        })
        .collect()
}

/// What a message queue costs the kernel besides its messages' text: the queue, and each
/// message's header (`struct msg_msg`, with its allocation rounded up).
const MSG_QUEUE_BYTES: u64 = 512;
const MSG_HEADER_BYTES: u64 = 128;
/// What each semaphore of a set costs (`struct sem`: measured 66 bytes per semaphore of
/// 32000-semaphore sets), and the set itself.
const SEM_BYTES: u64 = 72;
const SEM_SET_BYTES: u64 = 512;

/// The kernel memory of the message queues in a `/proc/sysvipc/msg` text: their queued text
/// (`cbytes`) and each message's header (`qnum`).
pub fn sysv_queue_bytes(text: &str) -> Result<u64, String> {
    Ok(sysv_rows(text, ["cbytes", "qnum"])?
        .into_iter()
        .map(|[bytes, n]| MSG_QUEUE_BYTES + bytes + n.saturating_mul(MSG_HEADER_BYTES))
        .fold(0, u64::saturating_add))
}

/// The kernel memory of the semaphore sets in a `/proc/sysvipc/sem` text (`nsems` each).
pub fn sysv_semaphore_bytes(text: &str) -> Result<u64, String> {
    Ok(sysv_rows(text, ["nsems"])?
        .into_iter()
        .map(|[n]| SEM_SET_BYTES + n.saturating_mul(SEM_BYTES))
        .fold(0, u64::saturating_add))
}

/// The whole of a seq_file, read from offset 0 (the same descriptor is read at every sample).
fn read_all_at(f: &std::fs::File) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = f.read_at(&mut buf, out.len() as u64)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// What a shared mapping maps: its device and inode, and whether it is a SysV segment.
type SharedKey = (ObjectKey, bool);

/// The `Pss` of the shared mappings (`s` in the permissions) of a full smaps text, summed by
/// what they map: the few numbers a sample keeps of a process's smaps, read with its rollup
/// (the text itself may be megabytes). Private mappings are left out: their pages written
/// since are anonymous copies (counted as Pss_Anon, not part of the object), and their other
/// pages, counted twice, only err high.
fn shared_pss(text: &str) -> HashMap<SharedKey, u64> {
    let mut out = HashMap::new();
    let mut current: Option<SharedKey> = None;
    for line in text.lines() {
        if let Some(Mapping {
            key, perms, path, ..
        }) = smaps_header(line)
        {
            current =
                (perms.as_bytes().get(3) == Some(&b's')).then(|| (key, path.starts_with("/SYSV")));
        } else if let Some(k) = current
            && let Some(v) = kb_field(line, "Pss")
        {
            *out.entry(k).or_default() += v * 1024;
        }
    }
    out
}

/// The Pss of [`shared_pss`] of those shared mappings whose object is one of `objects` (a
/// SysV segment by its shmid, a file of a tmpfs mount counted whole by the mount's device,
/// any other by its device and inode), by object.
fn objects_pss(
    shared: &HashMap<SharedKey, u64>,
    objects: &HashMap<Object, u64>,
) -> HashMap<Object, u64> {
    let mut out = HashMap::new();
    for (&(key, sysv), &pss) in shared {
        let fs = Object::Fs {
            major: key.major,
            minor: key.minor,
        };
        let obj = if sysv {
            Object::Sysv(key.ino)
        } else if objects.contains_key(&fs) {
            fs
        } else {
            Object::File(key)
        };
        if objects.contains_key(&obj) {
            *out.entry(obj).or_default() += pss;
        }
    }
    out
}

/// Adds the extent (offset + length) of each shared mapping in a maps (or smaps) text of an
/// object on `shm_dev` (a shared anonymous mapping, a memfd), but a SysV segment's (counted
/// at its own size), to `extents`, the largest per object.
pub fn shared_mappings(
    text: &str,
    shm_dev: Option<(u32, u32)>,
    extents: &mut HashMap<ObjectKey, u64>,
) {
    for line in text.lines() {
        let Some(m) = smaps_header(line) else {
            continue;
        };
        if m.perms.as_bytes().get(3) != Some(&b's') {
            continue;
        }
        if shm_dev == Some((m.key.major, m.key.minor)) && !m.path.starts_with("/SYSV") {
            let e = extents.entry(m.key).or_default();
            *e = (*e).max(m.offset.saturating_add(m.len));
        }
    }
}

impl MemWatch {
    /// Takes cordon's end of the seccomp listener of the memory-watch layer (the payload sends
    /// it before it execs).
    pub fn set_listener(&mut self, fd: OwnedFd) {
        // A speed-up only (Linux 6.6+): without it each answer is a cross-CPU wake-up.
        let _ = sys::notif_sync_wake_up(fd.as_fd());
        self.listener = Some(fd);
    }

    /// The listener, to poll (readable: a notification is pending).
    pub fn listener(&self) -> Option<BorrowedFd<'_>> {
        self.listener.as_ref().map(|f| f.as_fd())
    }

    /// Every process the filter was on has exited (the listener hung up).
    pub fn close_listener(&mut self) {
        self.listener = None;
    }

    /// Handles one notification of the memory-watch layer (the listener polled readable):
    /// an mmap with MAP_SHARED|MAP_ANONYMOUS, about to make a mapping, whose length it records
    /// as a creation (see [`creation_bound`]; counted at the next sample), or a private
    /// writable request of 4 MiB or more, which it notes when RLIMIT_DATA refuses it
    /// ([`WatchReport::refused_request`]); either way it lets the call go on.
    /// None: handled (or its caller is gone). Some(why): the watch is blind, the call could not
    /// be received or answered, and the sandbox must be killed (an unanswered call cannot
    /// proceed, and a notification lost is a creation unseen).
    pub fn notified(&mut self) -> Option<String> {
        let listener = self.listener.take()?;
        let blind = self.answer(listener.as_fd());
        self.listener = Some(listener);
        blind
    }

    fn answer(&mut self, listener: BorrowedFd) -> Option<String> {
        let n = match sys::notif_recv(listener) {
            Ok(n) => n,
            // The caller died (or took a signal) before the notification was read: its mmap
            // made nothing (a restarted call notifies again).
            Err(Errno::ENOENT | Errno::EINTR) => return None,
            Err(e) => {
                return Some(format!(
                    "cannot receive a call the memory watch must see (SECCOMP_IOCTL_NOTIF_RECV: {e}); the memory limit cannot be enforced"
                ));
            }
        };
        self.report.notifications += 1;
        match private_growth(i64::from(n.nr), &n.args) {
            None if i64::from(n.nr) == libc::SYS_mmap => {
                // Page-rounded, as the kernel sizes the mapping; a length the kernel refuses
                // makes no object (the record only ever raises a bound).
                let len = page_round(n.args[1]);
                self.creations.push(Creation {
                    after: self.complete,
                    len,
                });
            }
            // The caller waits in the call meanwhile: its VmData is what the kernel will add
            // the request to (another thread of it may change it, and the kernel charges less
            // for memory already writable or replaced by MAP_FIXED; evidence only), read while
            // the notification is still pending, so that the pid is still the caller's.
            Some(grow)
                if grow > 0
                    && self.report.refused_request.is_none()
                    && data_vm(n.pid).is_some_and(|d| d.saturating_add(grow) > self.limit)
                    && sys::notif_id_valid(listener, n.id).is_ok() =>
            {
                self.report.refused_request = Some(grow);
            }
            _ => {}
        }
        match sys::notif_continue(listener, n.id) {
            Ok(()) | Err(Errno::ENOENT) => None,
            Err(e) => Some(format!(
                "cannot let a call of the sandbox's process {} go on after the memory watch saw it (SECCOMP_IOCTL_NOTIF_SEND: {e}); the sandbox cannot proceed",
                n.pid
            )),
        }
    }
}

const PAGE: u64 = 4096;

fn page_round(len: u64) -> u64 {
    len.saturating_add(PAGE - 1) & !(PAGE - 1)
}

/// How much a notified call would add to its caller's private writable memory (RLIMIT_DATA's
/// count), page-rounded: a private mmap or an mprotect making memory writable adds its
/// length (the filter shows only those with PROT_WRITE), an mremap what it grows by. None for
/// a shared anonymous mmap (a creation), or any other call.
fn private_growth(nr: i64, args: &[u64; 6]) -> Option<u64> {
    const MAP_SHARED: u64 = 0x01;
    match nr {
        libc::SYS_mmap if args[3] & MAP_SHARED == 0 => Some(page_round(args[1])),
        libc::SYS_mprotect => Some(page_round(args[1])),
        libc::SYS_mremap => Some(page_round(args[2]).saturating_sub(page_round(args[1]))),
        _ => None,
    }
}

/// A process's `VmData` (its private writable memory, as RLIMIT_DATA counts it) in bytes,
/// from the host's /proc (the notification names the caller by its pid there).
fn data_vm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmData:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// A shared mapping's creation, shown to the watch before it took effect
/// ([`MemWatch::notified`]): how many complete samples there had been, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Creation {
    pub after: u64,
    pub len: u64,
}

/// In how many complete samples after its creation a shared object appears at the latest:
/// the first, unless the creating thread had not finished its mmap when that sample read
/// its mappings (it runs on at once: the listener wakes it on the supervisor's CPU), then the
/// next one.
pub const CREATION_WINDOW: u64 = 2;

/// Above this many creations in reach of the alive objects, [`creation_bound`] takes a
/// cheaper bound, larger or equal.
const EXACT_BOUND_MAX: usize = 2048;

/// The most that the shared objects alive now can hold, from their creations: each object
/// (given by the complete sample it first appeared in) was made by one distinct creation with
/// `after < appeared <= after + CREATION_WINDOW`, and holds at most that creation's length (a
/// shared anonymous object's size is fixed when it is made). Which creation made which object
/// is not known (an object is seen only by its inode, a creation only by its arguments), so
/// this is the largest total any such pairing gives: a maximum-weight matching, found
/// greedily (the sets of creations that can be paired with distinct objects form a transversal
/// matroid, on which the greedy choice by weight is optimal). Err(n): n objects have no
/// creation that can have made them.
pub fn creation_bound(appeared: &[u64], creations: &[Creation]) -> Result<u64, usize> {
    creation_bound_upto(appeared, creations, EXACT_BOUND_MAX)
}

/// [`creation_bound`], exact up to `exact_max` usable creations.
fn creation_bound_upto(
    appeared: &[u64],
    creations: &[Creation],
    exact_max: usize,
) -> Result<u64, usize> {
    if appeared.is_empty() {
        return Ok(0);
    }
    let fits = |c: &Creation, k: u64| c.after < k && k <= c.after + CREATION_WINDOW;
    // How many objects first appeared in each complete sample.
    let mut objects: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for &k in appeared {
        *objects.entry(k).or_default() += 1;
    }
    let mut usable: Vec<Creation> = creations
        .iter()
        .copied()
        .filter(|c| objects.keys().any(|&k| fits(c, k)))
        .collect();
    // Every object needs a creation: the largest pairing by count takes the samples in order,
    // each object the free creation whose window ends first (all windows are as long).
    usable.sort_unstable_by_key(|c| c.after);
    let mut taken = vec![false; usable.len()];
    let mut missing = 0;
    let mut lo = 0;
    for (&k, &n) in &objects {
        while lo < usable.len() && usable[lo].after + CREATION_WINDOW < k {
            lo += 1;
        }
        let mut need = n;
        let mut i = lo;
        while need > 0 && i < usable.len() && usable[i].after < k {
            if !taken[i] {
                taken[i] = true;
                need -= 1;
            }
            i += 1;
        }
        missing += need;
    }
    if missing > 0 {
        return Err(missing);
    }
    usable.sort_unstable_by_key(|c| std::cmp::Reverse(c.len));
    if usable.len() > exact_max {
        // Each sample's objects at the largest creations that fit them (a creation may then
        // count for two samples: larger or equal).
        return Ok(objects
            .iter()
            .map(|(&k, &n)| {
                usable
                    .iter()
                    .filter(|c| fits(c, k))
                    .take(n)
                    .fold(0u64, |t, c| t.saturating_add(c.len))
            })
            .fold(0u64, u64::saturating_add));
    }
    let mut chosen: Vec<Creation> = Vec::new();
    let mut total: u64 = 0;
    for c in usable {
        if chosen.len() == appeared.len() {
            break;
        }
        chosen.push(c);
        if pairs_with_distinct_objects(&chosen, &objects) {
            total = total.saturating_add(c.len);
        } else {
            chosen.pop();
        }
    }
    Ok(total)
}

/// Whether every creation of `chosen` can be paired with a distinct object (`objects`: how
/// many first appeared in each complete sample): creations by window end, each taking an
/// object of the earliest sample its window holds that has one left.
fn pairs_with_distinct_objects(
    chosen: &[Creation],
    objects: &std::collections::BTreeMap<u64, usize>,
) -> bool {
    let mut order: Vec<u64> = chosen.iter().map(|c| c.after).collect();
    order.sort_unstable();
    let mut left = objects.clone();
    order.iter().all(|&after| {
        (after + 1..=after + CREATION_WINDOW).any(|k| match left.get_mut(&k) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
    })
}

/// A mapping, as a maps or smaps header line shows it.
#[derive(Debug, PartialEq, Eq)]
struct Mapping<'a> {
    key: ObjectKey,
    perms: &'a str,
    /// In the object, in bytes.
    offset: u64,
    len: u64,
    path: &'a str,
}

/// `start-end perms offset MAJ:MIN inode [path]`.
fn smaps_header(line: &str) -> Option<Mapping<'_>> {
    let mut it = line.split_ascii_whitespace();
    let range = it.next()?;
    let (start, end) = range.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(start, 16).ok()?,
        u64::from_str_radix(end, 16).ok()?,
    );
    let perms = it.next()?;
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    let (maj, min) = it.next()?.split_once(':')?;
    let ino = it.next()?.parse().ok()?;
    let key = ObjectKey {
        major: u32::from_str_radix(maj, 16).ok()?,
        minor: u32::from_str_radix(min, 16).ok()?,
        ino,
    };
    Some(Mapping {
        key,
        perms,
        offset,
        len: end.checked_sub(start)?,
        path: it.next().unwrap_or(""),
    })
}

/// The device of the kernel's internal shmem mount (that of a memfd, of a shared anonymous
/// mapping, of a SysV segment): the same for every process and namespace.
fn shm_dev() -> Result<(u32, u32), String> {
    let fd = nix::sys::memfd::memfd_create("cordon-shm-dev", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
        .map_err(|e| format!("cannot create a memfd to learn the device of shared anonymous memory (memfd_create: {e}); the memory watch cannot count shared mappings without it: allow memfd_create to cordon itself, or give it a cgroup to hold --memory (see `cordon doctor`)"))?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| {
        format!("cannot stat a memfd to learn the device of shared anonymous memory: {e}")
    })?;
    Ok((libc::major(st.st_dev), libc::minor(st.st_dev)))
}

/// The sandbox's writable tmpfs mounts, whose files the watch counts.
pub const TMPFS_MOUNTS: [&str; 3] = ["/tmp", "/dev/shm", crate::spec::WORKSPACE];

/// What init hands the supervisor for the watch.
pub struct Handover {
    /// The sandbox's procfs.
    pub proc_dir: OwnedFd,
    /// [`TMPFS_MOUNTS`], in order, then the export directory's when there is one.
    pub mounts: Vec<OwnedFd>,
    /// init's open `/proc/sysvipc/shm`, `msg` and `sem`; None on a kernel without SysV IPC.
    pub sysv: Option<[OwnedFd; 3]>,
    /// A `NETLINK_SOCK_DIAG` socket of the sandbox's network namespace (see
    /// [`super::sockdiag`]); None when the sandbox shares the host's (`--net host`), whose
    /// sockets cannot be told apart.
    pub sockets: Option<OwnedFd>,
}

/// In init, once the sandbox's root is built: sends cordon a descriptor of its /proc, of each
/// of [`TMPFS_MOUNTS`], its open `/proc/sysvipc/shm`, `msg` and `sem` (which list the objects
/// of the IPC namespace they were opened in) and, when `sockets` (the sandbox has a network namespace of its
/// own), a sock_diag socket of that namespace.
pub fn send_proc(to_parent: &OwnedFd, sockets: bool, extra: Option<&str>) -> Result<(), String> {
    use nix::fcntl::OFlag;
    let open = |path: &str, flags: OFlag| {
        nix::fcntl::open(
            path,
            flags | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| format!("open the sandbox's {path}: {e}"))
    };
    let dir = open("/proc", OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    let mounts = TMPFS_MOUNTS
        .iter()
        .copied()
        .chain(extra)
        .map(|m| open(m, OFlag::O_RDONLY | OFlag::O_DIRECTORY))
        .collect::<Result<Vec<_>, _>>()?;
    // A kernel without SysV IPC (CONFIG_SYSVIPC=n) has no segments, queues or sets to count.
    let sysv = if std::path::Path::new("/proc/sysvipc").exists() {
        Some([
            open("/proc/sysvipc/shm", OFlag::O_RDONLY)?,
            open("/proc/sysvipc/msg", OFlag::O_RDONLY)?,
            open("/proc/sysvipc/sem", OFlag::O_RDONLY)?,
        ])
    } else {
        None
    };
    let diag = match sockets {
        true => {
            let diag = super::sockdiag::open()?;
            // One dump now, so that a kernel without unix_diag refuses the run before the
            // program starts, not at the first sample.
            super::sockdiag::probe(diag.as_fd())?;
            Some(diag)
        }
        false => None,
    };
    let mut fds = vec![dir.as_raw_fd()];
    fds.extend(mounts.iter().map(|f| f.as_raw_fd()));
    fds.extend(sysv.iter().flatten().map(|f| f.as_raw_fd()));
    fds.extend(diag.as_ref().map(|f| f.as_raw_fd()));
    // Which of the optional descriptors follow the mounts, in this order.
    let present = u8::from(sysv.is_some()) * HAS_SYSV
        + u8::from(diag.is_some()) * HAS_SOCKETS
        + u8::from(extra.is_some()) * HAS_EXTRA_MOUNT;
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let tag = [HANDOVER_TAG, present];
    let iov = [std::io::IoSlice::new(&tag)];
    sendmsg::<()>(to_parent.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(|e| format!("send the sandbox's /proc to cordon (SCM_RIGHTS): {e}"))?;
    Ok(())
}

/// In the payload, once it installed the program with the memory-watch layer: sends cordon its
/// listener over init's handover socket (`sock`, the payload's copy), before it execs.
pub fn send_listener(sock: RawFd, listener: &OwnedFd) -> Result<(), String> {
    sys::send_fd_no_alloc(sock, LISTENER_TAG[0], listener.as_raw_fd())
        .map_err(|e| format!("send the seccomp listener to cordon (SCM_RIGHTS): {e}"))
}

/// The byte that comes with the listener.
const LISTENER_TAG: &[u8] = b"L";
/// The bytes that come with init's descriptors: this tag, then which optional ones follow.
const HANDOVER_TAG: u8 = b'P';
const HAS_SYSV: u8 = 1;
const HAS_SOCKETS: u8 = 2;
/// A mount beside [`TMPFS_MOUNTS`] follows them: the export directory's.
const HAS_EXTRA_MOUNT: u8 = 4;

/// What came in on the handover socket.
pub enum Received {
    /// init's descriptors ([`send_proc`]).
    Handover(Handover),
    /// The seccomp listener of the memory-watch layer ([`send_listener`]).
    Listener(OwnedFd),
}

/// In the supervisor, when the handover socket polls readable: Ok(Some(_)) when init sent its
/// descriptors or the payload its listener, Ok(None) to try again later, Err at end-of-file
/// without them.
pub fn receive_proc(from_child: &OwnedFd) -> Result<Option<Received>, String> {
    let mut byte = [0u8; 2];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 6 + TMPFS_MOUNTS.len()]);
    let msg = match recvmsg::<()>(
        from_child.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(m) => m,
        Err(Errno::EINTR | Errno::EAGAIN) => return Ok(None),
        Err(e) => return Err(format!("cannot receive the sandbox's /proc from init: {e}")),
    };
    let mut got = Vec::new();
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmRights(fds) = c {
                // Every descriptor received is ours to close.
                got.extend(fds.into_iter().map(crate::sys::own_received_fd));
            }
        }
    }
    let bytes = msg.bytes;
    if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Err(
            "the descriptors sent for the memory watch were cut short (MSG_CTRUNC); the memory limit cannot be enforced".into(),
        );
    }
    if bytes == 1 && byte[..1] == *LISTENER_TAG {
        return match <[OwnedFd; 1]>::try_from(got) {
            Ok([listener]) => Ok(Some(Received::Listener(listener))),
            Err(got) => Err(format!(
                "the sandbox's payload sent {} descriptors for the memory watch's seccomp listener, not 1; the memory limit cannot be enforced",
                got.len()
            )),
        };
    }
    let present = byte[1];
    let mount_count = TMPFS_MOUNTS.len() + usize::from(present & HAS_EXTRA_MOUNT != 0);
    let expected = 1
        + mount_count
        + 3 * usize::from(present & HAS_SYSV != 0)
        + usize::from(present & HAS_SOCKETS != 0);
    if bytes == 2 && byte[0] == HANDOVER_TAG && got.len() == expected {
        let mut got = got.into_iter();
        let Some(proc_dir) = got.next() else {
            unreachable!("checked length")
        };
        let mounts: Vec<OwnedFd> = got.by_ref().take(mount_count).collect();
        let sysv = match present & HAS_SYSV != 0 {
            true => got.next().zip(got.next()).zip(got.next()),
            false => None,
        }
        .map(|((shm, msg), sem)| [shm, msg, sem]);
        let sockets = if present & HAS_SOCKETS != 0 {
            got.next()
        } else {
            None
        };
        return Ok(Some(Received::Handover(Handover {
            proc_dir,
            mounts,
            sysv,
            sockets,
        })));
    }
    match bytes {
        0 if got.is_empty() => Err(
            "the sandbox's init closed the memory watch's channel without sending its /proc and the seccomp listener; the memory limit cannot be enforced".into(),
        ),
        _ => Err(format!(
            "the memory watch's channel brought an unexpected message ({bytes} bytes {:?}, {} descriptors; init's hand-over is tag {:?} with {expected} descriptors for those bytes); the memory limit cannot be enforced",
            &byte[..bytes.min(2)],
            got.len(),
            HANDOVER_TAG as char,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_growth_is_what_rlimit_data_would_add() {
        let mib = 1u64 << 20;
        // mmap(addr, len, prot, flags, ...): private counts (page-rounded), shared is a creation.
        let mmap = |len, flags| private_growth(libc::SYS_mmap, &[0, len, 3, flags, 0, 0]);
        assert_eq!(mmap(16 * mib + 1, 0x22), Some(16 * mib + 4096));
        assert_eq!(mmap(16 * mib, 0x21), None);
        // mremap(old, old_len, new_len, ...): what it grows by; shrinking adds nothing.
        let mremap = |old, new| private_growth(libc::SYS_mremap, &[0, old, new, 1, 0, 0]);
        assert_eq!(mremap(16 * mib, 48 * mib), Some(32 * mib));
        assert_eq!(mremap(48 * mib, 16 * mib), Some(0));
        assert_eq!(
            private_growth(libc::SYS_mprotect, &[0, 20 * mib, 3, 0, 0, 0]),
            Some(20 * mib)
        );
        assert_eq!(
            private_growth(libc::SYS_munmap, &[0, 20 * mib, 0, 0, 0, 0]),
            None
        );
        // VmData of this process: present and nonzero.
        assert!(data_vm(std::process::id()).is_some_and(|d| d > 0));
    }

    #[test]
    fn an_exiting_process_is_told_from_one_that_hides_its_descriptors() {
        let live = "Name:\tsh\nState:\tS (sleeping)\nVmSize:\t    2480 kB\nVmRSS:\t 900 kB\n";
        let no_mm = "Name:\tsh\nState:\tR (running)\nThreads:\t1\n";
        let zombie = "Name:\tsh\nState:\tZ (zombie)\n";
        assert!(
            !status_says_exiting(live),
            "a live process (non-dumpable or not) keeps its address space"
        );
        assert!(
            status_says_exiting(no_mm),
            "no VmSize: its address space is gone"
        );
        assert!(status_says_exiting(zombie));
        assert!(
            !status_says_exiting(""),
            "a status it cannot read is not taken for an exit: fails closed"
        );
        assert!(exiting("/proc/999999999"), "a process that is gone");
        assert!(
            !exiting("/proc/self/fd/0/not-a-dir"),
            "ENOTDIR is not gone: fails closed"
        );
        assert!(!exiting(&format!("/proc/{}", std::process::id())));
    }

    const ROLLUP: &str =
        "556daae56000-7ffe1f17a000 ---p 00000000 00:00 0                          [rollup]
Rss:               23804 kB
Pss:               22045 kB
Pss_Dirty:         17144 kB
Pss_Anon:           6904 kB
Pss_File:           4901 kB
Pss_Shmem:         10240 kB
Shared_Clean:       2036 kB
Swap:                  8 kB
SwapPss:               4 kB
Locked:                0 kB
";

    #[test]
    fn rollup_counts_anon_shmem_and_swapped_pss() {
        assert_eq!(rollup_bytes(ROLLUP), Some((6904 + 10240 + 4) * 1024));
        // Pss and Pss_Dirty are not mistaken for Pss_Anon/Pss_Shmem.
        assert_eq!(kb_field(ROLLUP, "Pss"), Some(22045));
        let old = ROLLUP.replace("Pss_Shmem", "Pss_Other");
        assert_eq!(
            rollup_bytes(&old),
            None,
            "a missing field must not count as 0"
        );
    }

    #[test]
    fn hiding_in_many_recent_samples_is_blind_whichever_processes_hid() {
        let mut w = MemWatch::new(1 << 30, &[]);
        // Rare transients (an exec, an exit) are tolerated, and so is a process unreadable
        // for less than its grace.
        for i in 0..500 {
            assert_eq!(w.note_hiding(i % 10 == 0, i % 100 < 40), None, "{i}");
        }
        // Descriptors hidden in one sample out of two are not.
        let blind = (0..SANDBOX_WINDOW).find_map(|i| w.note_hiding(i % 2 == 0, false));
        let why = blind.expect("blind");
        assert!(why.contains("non-dumpable"), "{why}");
        // Nor memory unreadable in most samples, whichever processes it was.
        let mut w = MemWatch::new(1 << 30, &[]);
        let blind = (0..SANDBOX_WINDOW).find_map(|i| w.note_hiding(false, i % 5 != 0));
        let why = blind.expect("blind");
        assert!(why.contains("unreadable"), "{why}");
    }

    #[test]
    fn memfd_links() {
        assert!(is_memfd(b"/memfd:bomb (deleted)"));
        assert!(!is_memfd(b"/dev/shm/x"));
        assert!(!is_memfd(b"anon_inode:[memfd]x"));
        assert!(!is_memfd(b"/tmp/memfd:x"));
    }

    #[test]
    fn only_files_on_the_sandbox_s_tmpfs_mounts_may_be_its_fifos() {
        assert!(on_tmpfs(b"/tmp/fifo", None));
        assert!(on_tmpfs(b"/workspace/a/b (deleted)", None));
        assert!(on_tmpfs(b"/dev/shm/x", None));
        assert!(!on_tmpfs(b"/tmpx/fifo", None));
        assert!(!on_tmpfs(b"/usr/lib/python3", None));
        assert!(!on_tmpfs(b"/tmp", None));
        // The export directory, when the run has one.
        assert!(!on_tmpfs(b"/deps/fifo", None));
        assert!(on_tmpfs(b"/deps/fifo", Some("/deps")));
        assert!(!on_tmpfs(b"/depsx/fifo", Some("/deps")));
    }

    #[test]
    fn a_mount_s_type_is_read_from_mountinfo() {
        let info = "\
400 380 0:52 / / ro,nosuid,nodev,relatime - tmpfs cordon-root ro,size=4k
401 400 0:61 / /usr ro,nosuid,nodev,relatime - overlay overlay ro,lowerdir=/usr
402 400 0:62 / /workspace rw,nosuid,nodev,relatime shared:5 - tmpfs tmpfs rw,size=65536k
";
        assert_eq!(mount_fs_type(info, "402"), Some("tmpfs"));
        assert_eq!(mount_fs_type(info, "401"), Some("overlay"));
        // Ids are whole fields: 40 is none of them.
        assert_eq!(mount_fs_type(info, "40"), None);
        assert_eq!(mount_fs_type(info, "999"), None);
    }

    #[test]
    fn epoll_items_are_the_tfd_lines_of_its_fdinfo() {
        let info = b"pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\ntfd:        5 events:       19 data:                5  pos:0 ino:40d sdev:f\ntfd:        7 events:       19 data:                7  pos:0 ino:40d sdev:f\n";
        assert_eq!(epoll_items(info), 2);
        assert_eq!(epoll_items(b"pos:\t0\nflags:\t02\n"), 0);
    }

    #[test]
    fn open_proc_files_count_their_buffers() {
        for fdinfo in [&b"12/fdinfo/5"[..], b"12/task/13/fdinfo/0"] {
            assert!(is_fdinfo(fdinfo));
        }
        for other in [
            &b"12/fd/5"[..],
            b"self/fdinfo/5",
            b"12/fdinfo",
            b"12/fdinfo/",
            b"12/task/x/fdinfo/1",
            b"12/status",
        ] {
            assert!(!is_fdinfo(other), "{}", String::from_utf8_lossy(other));
        }
        // Two pages at least; a longer record, the power of two that holds it (64 KiB for an
        // epoll of 800 items).
        assert_eq!(seq_buffer_bytes(0), 8192);
        assert_eq!(seq_buffer_bytes(8192), 8192);
        assert_eq!(seq_buffer_bytes(8193), 16384);
        assert_eq!(seq_buffer_bytes(800 * 80), 65536);
        assert_eq!(seq_buffer_bytes(u64::MAX), u64::MAX);
    }

    #[test]
    fn sysv_queues_and_semaphore_sets_count_what_they_hold() {
        let msg = "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n         0          0   600       16000          2   123     0  1000  1000  1000  1000 1700000000          0 1700000000\n         0          1   600           0          0     0     0  1000  1000  1000  1000          0          0 1700000000\n";
        assert_eq!(
            sysv_queue_bytes(msg),
            Ok(2 * MSG_QUEUE_BYTES + 16000 + 2 * MSG_HEADER_BYTES)
        );
        let sem = "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n         0          0   600      32000  1000  1000  1000  1000          0 1700000000\n";
        assert_eq!(
            sysv_semaphore_bytes(sem),
            Ok(SEM_SET_BYTES + 32000 * SEM_BYTES)
        );
        // A table with only its header holds nothing; a table without a header, without a
        // column the count needs, or with a row that does not parse is an error, not 0.
        let header_only = msg.lines().next().unwrap();
        assert_eq!(sysv_queue_bytes(header_only), Ok(0));
        assert!(
            sysv_queue_bytes("")
                .unwrap_err()
                .contains("no `cbytes` column")
        );
        let no_qnum = "       key      msqid perms      cbytes lspid\n         0          0   600       16000   123\n";
        assert!(
            sysv_queue_bytes(no_qnum)
                .unwrap_err()
                .contains("no `qnum` column")
        );
        let bad_row = format!("{header_only}\n         0          0   600       lots          2\n");
        assert!(
            sysv_queue_bytes(&bad_row)
                .unwrap_err()
                .contains("does not parse")
        );
        let short_row = format!(
            "{}\n         0          0   600\n",
            sem.lines().next().unwrap()
        );
        assert!(sysv_semaphore_bytes(&short_row).is_err());
    }

    #[test]
    fn pss_of_the_mappings_of_given_objects() {
        let smaps = "\
7f0000000000-7f0000100000 rw-s 00000000 00:01 4242                       /memfd:a (deleted)
Size:               1024 kB
Rss:                 512 kB
Pss:                 256 kB
Pss_Dirty:           256 kB
7f0000200000-7f0000300000 rw-s 00000000 00:01 4243                       /memfd:b (deleted)
Size:               1024 kB
Pss:                 100 kB
7f0000400000-7f0000500000 rw-s 00100000 00:01 4242                       /memfd:a (deleted)
Pss:                  64 kB
7f0000600000-7f0000700000 rw-s 00000000 fe:1a 4242                       /usr/lib/x
Pss:                  32 kB
7f0000700000-7f0000800000 rw-p 00000000 00:01 4242                       /memfd:a (deleted)
Pss:                1000 kB
7f0000800000-7f0000900000 rw-s 00000000 00:01 3                          /SYSV00000000 (deleted)
Pss:                   8 kB
7f0000a00000-7f0000b00000 rw-s 00000000 00:01 4                          /SYSV00000000 (deleted)
Pss:                  16 kB
";
        let a = ObjectKey {
            major: 0,
            minor: 1,
            ino: 4242,
        };
        let other_dev = ObjectKey {
            major: 0xfe,
            minor: 0x1a,
            ino: 4242,
        };
        let objects: HashMap<_, _> = [
            (Object::File(a), 0),
            (Object::File(other_dev), 0),
            (Object::Sysv(3), 0),
        ]
        .into_iter()
        .collect();
        let got = objects_pss(&shared_pss(smaps), &objects);
        assert_eq!(got.get(&Object::File(a)), Some(&((256 + 64) * 1024)));
        assert_eq!(got.get(&Object::File(other_dev)), Some(&(32 * 1024)));
        assert_eq!(got.get(&Object::Sysv(3)), Some(&(8 * 1024)));
        assert_eq!(got.len(), 3, "{got:?}");
    }

    #[test]
    fn mappings_of_files_on_a_counted_tmpfs_count_for_the_mount() {
        let smaps = "\
7f0000000000-7f0000100000 rw-s 00000000 00:2a 5                          /dev/shm/x
Pss:                 512 kB
7f0000200000-7f0000300000 rw-s 00000000 00:2b 5                          /tmp/y
Pss:                 100 kB
";
        let shm = Object::Fs {
            major: 0,
            minor: 0x2a,
        };
        let objects: HashMap<_, _> = [(shm, 1 << 30)].into_iter().collect();
        let got = objects_pss(&shared_pss(smaps), &objects);
        assert_eq!(got, [(shm, 512 * 1024)].into_iter().collect());
    }

    #[test]
    fn headers_are_told_from_fields() {
        assert_eq!(smaps_header("Pss:                 256 kB"), None);
        assert_eq!(smaps_header("VmFlags: rd wr sh mr mw me ms sd"), None);
        assert_eq!(
            smaps_header("7f00-7f03 rw-s 00002000 00:01 7 /SYSV00000000 (deleted)"),
            Some(Mapping {
                key: ObjectKey {
                    major: 0,
                    minor: 1,
                    ino: 7
                },
                perms: "rw-s",
                offset: 0x2000,
                len: 0x3,
                path: "/SYSV00000000"
            })
        );
        assert_eq!(smaps_header("7f03-7f00 rw-s 00000000 00:01 7"), None);
    }

    const MAPS: &str = "\
55d4150000-55d4151000 r--p 00000000 fe:01 1234                       /usr/bin/python3
7f0000000000-7f0000100000 rw-s 00000000 00:01 10                         /dev/zero (deleted)
7f0000100000-7f0000101000 rw-s 03b00000 00:01 11                         /memfd:a (deleted)
7f0000200000-7f0000300000 rw-s 00000000 00:01 11                         /memfd:a (deleted)
7f0000300000-7f0000400000 rw-s 00000000 00:01 12                         /SYSV00000000 (deleted)
7f0000400000-7f0000500000 rw-p 00000000 00:01 13                         /memfd:b (deleted)
7f0000500000-7f0000600000 r--s 00000000 00:2a 5                          /dev/shm/x
";

    fn key(ino: u64) -> ObjectKey {
        ObjectKey {
            major: 0,
            minor: 1,
            ino,
        }
    }

    #[test]
    fn shared_mappings_of_shmem_objects_count_to_their_extent() {
        let mut extents = HashMap::new();
        shared_mappings(MAPS, Some((0, 1)), &mut extents);
        // The furthest offset mapped; SysV segments, private mappings and other devices
        // are counted otherwise.
        let want: HashMap<_, _> = [(key(10), 1 << 20), (key(11), 0x3b00000 + 4096)]
            .into_iter()
            .collect();
        assert_eq!(extents, want);
        let mut none = HashMap::new();
        let private = "7f00-7f01 rw-p 00000000 00:01 10 /dev/zero (deleted)\n";
        shared_mappings(private, Some((0, 1)), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn an_object_shown_only_by_mappings_keeps_its_largest_size_while_mapped() {
        let mut w = MemWatch::new(1 << 30, &[]);
        let sample = |w: &mut MemWatch, fd: Option<u64>, extent: Option<u64>, partial| {
            let mut objects = HashMap::new();
            if let Some(size) = fd {
                objects.insert(Object::File(key(11)), size);
            }
            let extents = extent.map(|e| (key(11), e)).into_iter().collect();
            // Each object's creation was shown (none of them counts: length 0).
            w.creations.push(Creation {
                after: w.complete,
                len: 0,
            });
            assert_eq!(w.object_sizes(&mut objects, extents, partial), Ok(0));
            objects.get(&Object::File(key(11))).copied()
        };
        // A descriptor shows the allocated size, whatever is mapped.
        assert_eq!(
            sample(&mut w, Some(60 << 20), Some(4096), false),
            Some(60 << 20)
        );
        // Closed: the one-page mapping still keeps the 60 MiB counted.
        assert_eq!(sample(&mut w, None, Some(4096), false), Some(60 << 20));
        // A mapping that grows counts to its extent...
        assert_eq!(
            sample(&mut w, None, Some(100 << 20), false),
            Some(100 << 20)
        );
        // ...and shrinking it (munmap, mremap) does not free the object's pages beyond.
        assert_eq!(sample(&mut w, None, Some(4096), false), Some(100 << 20));
        // A sample that could not read every process forgets nothing.
        assert_eq!(sample(&mut w, None, None, true), None);
        assert_eq!(sample(&mut w, None, Some(4096), false), Some(100 << 20));
        // Unmapped everywhere: the object is gone.
        assert_eq!(sample(&mut w, None, None, false), None);
        assert_eq!(sample(&mut w, None, Some(4096), false), Some(4096));
    }

    #[test]
    fn an_object_cut_down_before_any_sample_counts_at_its_creation() {
        let mut w = MemWatch::new(1 << 30, &[]);
        let extents = |e: u64| [(key(12), e)].into_iter().collect::<HashMap<_, _>>();
        // A 100 MiB shared mapping made, filled and cut down to a page before the first
        // sample: its creation says what the page's object holds.
        w.creations.push(Creation {
            after: 0,
            len: 100 << 20,
        });
        let mut objects = HashMap::new();
        assert_eq!(
            w.object_sizes(&mut objects, extents(4096), false),
            Ok((100 << 20) - 4096)
        );
        // Still mapped later: still counted, though its creation is long past.
        for _ in 0..5 {
            let mut objects = HashMap::new();
            assert_eq!(
                w.object_sizes(&mut objects, extents(4096), false),
                Ok((100 << 20) - 4096)
            );
        }
        // Gone: so is the count, and its creation.
        let mut objects = HashMap::new();
        assert_eq!(w.object_sizes(&mut objects, HashMap::new(), false), Ok(0));
        assert!(w.creations.is_empty(), "{:?}", w.creations);
        // An object whose creation the watch was not shown blinds it.
        let mut objects = HashMap::new();
        let err = w
            .object_sizes(&mut objects, extents(4096), false)
            .unwrap_err();
        assert!(err.contains("no mmap shown to the watch"), "{err}");
    }

    #[test]
    fn sysv_segments_rss_and_swap() {
        let text = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
         0          0   600               1048576 29313 29313      1     0     0     0     0 1796013122          0 1796013122                 12288                     0
         0         32   600              16777216    12    12      0  1000  1000  1000  1000 1796013122 1796013123 1796013122              16777216                  4096
";
        assert_eq!(
            sysv_segments(text),
            Ok(vec![(0, 12288), (32, 16777216 + 4096)])
        );
        assert_eq!(sysv_segments(text.lines().next().unwrap()), Ok(vec![]));
        assert!(sysv_segments("").is_err());
        // A kernel whose table lacks the swap column is not read as holding nothing.
        let old = text.replace("swap", "swp");
        assert!(
            sysv_segments(&old)
                .unwrap_err()
                .contains("no `swap` column")
        );
    }

    fn made(after: u64, mib: u64) -> Creation {
        Creation {
            after,
            len: mib << 20,
        }
    }

    #[test]
    fn an_object_counts_at_the_length_it_was_made_with() {
        // Made after sample 3, seen (cut down to a page) in sample 4: 100 MiB.
        assert_eq!(creation_bound(&[4], &[made(3, 100)]), Ok(100 << 20));
        // Or in sample 5, its mmap still unfinished when sample 4 read the mappings.
        assert_eq!(creation_bound(&[5], &[made(3, 100)]), Ok(100 << 20));
        // Never later: an object no creation can have made is the watch's blindness.
        assert_eq!(creation_bound(&[6], &[made(3, 100)]), Err(1));
        assert_eq!(creation_bound(&[4], &[]), Err(1));
        assert_eq!(creation_bound(&[4, 4], &[made(3, 1)]), Err(1));
        // Nor earlier than its creation.
        assert_eq!(creation_bound(&[3], &[made(3, 100)]), Err(1));
        assert_eq!(creation_bound(&[], &[made(3, 100)]), Ok(0));
    }

    #[test]
    fn which_creation_made_which_object_is_resolved_to_the_largest_total() {
        // Two objects, three creations (one mmap failed or its object is gone): the two
        // largest, whichever object is which.
        assert_eq!(
            creation_bound(&[4, 4], &[made(3, 1), made(3, 100), made(3, 2)]),
            Ok(102 << 20)
        );
        // A stream of creations, few objects alive: each alive object at the largest
        // creation it can have come from, not at the sum of the stream.
        let stream: Vec<Creation> = (0..600).map(|i| made(i / 30, 1 + i % 2)).collect();
        assert_eq!(creation_bound(&[20], &stream), Ok(2 << 20));
        // A creation whose object appears a sample late cannot also count for an object of
        // the sample before: a big one made after 3 and seen in 5, a small one made after 3
        // and seen in 4, and one made after 4 seen in 5.
        assert_eq!(
            creation_bound(&[4, 5, 5], &[made(3, 100), made(3, 1), made(4, 1)]),
            Ok(102 << 20)
        );
        // An object of sample 4 cannot take a creation made after sample 4.
        assert_eq!(
            creation_bound(&[4, 5], &[made(3, 1), made(4, 100)]),
            Ok(101 << 20)
        );
        // The big creation is spent on one object: an old object alive since sample 1 and
        // a new one in 9 each take a creation in their own windows.
        assert_eq!(
            creation_bound(&[1, 9], &[made(0, 400), made(8, 1)]),
            Ok(401 << 20)
        );
    }

    #[test]
    fn many_creations_take_a_cheaper_bound_that_is_not_smaller() {
        let creations: Vec<Creation> = (0..50u64)
            .map(|i| Creation {
                after: i % 3,
                len: ((i * 37) % 50 + 1) << 12,
            })
            .collect();
        for objects in [&[1u64, 2, 2][..], &[2, 3, 3, 3], &[1, 1, 1, 1, 2, 3, 4]] {
            let exact = creation_bound_upto(objects, &creations, usize::MAX).unwrap();
            let cheap = creation_bound_upto(objects, &creations, 0).unwrap();
            assert!(cheap >= exact, "{objects:?}: {cheap} < {exact}");
            // At most each object's largest fitting creation.
            assert!(cheap <= objects.len() as u64 * (50 << 12), "{cheap}");
        }
        // Above the cap, creation_bound takes the cheap one.
        let many: Vec<Creation> = (0..EXACT_BOUND_MAX as u64 + 1)
            .map(|i| Creation { after: 0, len: i })
            .collect();
        assert_eq!(
            creation_bound(&[1, 1], &many),
            creation_bound_upto(&[1, 1], &many, 0)
        );
    }
}

//! A fake cgroupfs on a tempdir, for unit tests. It emulates what the kernel does that the
//! backends rely on: `mkdir` creates the interface files (copied from the parent, with
//! `cgroup.procs` and `cgroup.subtree_control` empty), `rmdir` removes a cgroup with its
//! interface files but fails with EBUSY while it has live processes or children, a write to
//! `cgroup.procs` adds a pid, `cgroup.kill` kills its pids, `cgroup.subtree_control` takes
//! `+ctrl` tokens (EBUSY when the cgroup has processes and is marked as non-root), and files are
//! never created by a write (ENOENT). Paths under a "denied" prefix fail with EACCES.

use super::host::{CgroupFs, HostPaths};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Default)]
struct State {
    alive: BTreeSet<i32>,
    killed: Vec<i32>,
    denied: Vec<PathBuf>,
    /// Cgroups where the no-internal-processes rule applies (everything but the v2 root).
    internal_rule: Vec<PathBuf>,
    /// Writes to these files fail with this errno (a kernel refusal `writable` cannot predict).
    failing: Vec<(PathBuf, i32)>,
    /// How many times a `cgroup.procs` was read.
    procs_reads: usize,
}

#[derive(Debug)]
pub struct FakeFs {
    pub dir: tempfile::TempDir,
    state: Mutex<State>,
}

fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl FakeFs {
    pub fn new() -> FakeFs {
        FakeFs {
            dir: tempfile::tempdir().unwrap(),
            state: Mutex::default(),
        }
    }
    pub fn root(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
    /// Creates `rel` (and parents) with the given interface files.
    pub fn cgroup(&self, rel: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.dir.path().join(rel.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
        dir
    }
    /// The names of the interface files in `dir`.
    pub fn files(&self, dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
    pub fn set(&self, path: &Path, content: &str) {
        std::fs::write(path, content).unwrap();
    }
    pub fn get(&self, path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }
    pub fn deny(&self, prefix: &Path) {
        self.state.lock().unwrap().denied.push(prefix.to_path_buf());
    }
    pub fn fail_writes(&self, path: &Path, errno: i32) {
        self.state
            .lock()
            .unwrap()
            .failing
            .push((path.to_path_buf(), errno));
    }
    pub fn internal_rule(&self, dir: &Path) {
        self.state
            .lock()
            .unwrap()
            .internal_rule
            .push(dir.to_path_buf());
    }
    pub fn spawn(&self, pid: i32) {
        self.state.lock().unwrap().alive.insert(pid);
    }
    /// How many times a `cgroup.procs` file was read.
    pub fn procs_reads(&self) -> usize {
        self.state.lock().unwrap().procs_reads
    }
    pub fn killed(&self) -> Vec<i32> {
        self.state.lock().unwrap().killed.clone()
    }
    pub fn host(&self, proc_self_cgroup: &str, pid: u32) -> HostPaths {
        HostPaths {
            cgroup_root: self.root(),
            proc_self_cgroup: proc_self_cgroup.to_string(),
            pid,
            uid: 1000,
        }
    }
    fn denied(&self, path: &Path) -> bool {
        self.state
            .lock()
            .unwrap()
            .denied
            .iter()
            .any(|d| path.starts_with(d))
    }
    /// Removes `pid` from every `cgroup.procs` under `dir`.
    fn remove_pid(&self, dir: &Path, pid: i32) -> io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                self.remove_pid(&entry.path(), pid)?;
            } else if entry.file_name() == "cgroup.procs" {
                let text = std::fs::read_to_string(entry.path())?;
                let kept: String = text
                    .lines()
                    .filter(|l| l.trim().parse::<i32>().ok() != Some(pid))
                    .map(|l| format!("{l}\n"))
                    .collect();
                if kept != text {
                    std::fs::write(entry.path(), kept)?;
                }
            }
        }
        Ok(())
    }
    fn live_pids(&self, procs: &Path) -> Vec<i32> {
        let text = std::fs::read_to_string(procs).unwrap_or_default();
        let st = self.state.lock().unwrap();
        text.lines()
            .filter_map(|l| l.trim().parse().ok())
            .filter(|p| st.alive.contains(p))
            .collect()
    }
}

impl CgroupFs for FakeFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        if path.file_name().is_some_and(|n| n == "cgroup.procs") {
            self.state.lock().unwrap().procs_reads += 1;
            std::fs::metadata(path)?;
            return Ok(self
                .live_pids(path)
                .iter()
                .map(|p| format!("{p}\n"))
                .collect());
        }
        std::fs::read_to_string(path)
    }
    fn write(&self, path: &Path, data: &str) -> io::Result<()> {
        if self.denied(path) {
            return Err(err(libc::EACCES));
        }
        let failing = self.state.lock().unwrap().failing.clone();
        if let Some((_, errno)) = failing.iter().find(|(p, _)| p == path) {
            return Err(err(*errno));
        }
        if !path.is_file() {
            return Err(err(libc::ENOENT));
        }
        let dir = path.parent().unwrap();
        match path.file_name().unwrap().to_str().unwrap() {
            "cgroup.procs" => {
                let pid: i32 = data.trim().parse().map_err(|_| err(libc::EINVAL))?;
                if !self.state.lock().unwrap().alive.contains(&pid) {
                    return Err(err(libc::ESRCH));
                }
                // A migration: the pid leaves whichever cgroup of this hierarchy it was in (a
                // pure v2 tree is one hierarchy; else each top-level directory is one).
                let root = self.root();
                let hierarchy = if root.join("cgroup.controllers").exists() {
                    root
                } else {
                    let first = path.strip_prefix(&root).ok().and_then(|r| r.iter().next());
                    first.map_or(root.clone(), |c| root.join(c))
                };
                self.remove_pid(&hierarchy, pid)?;
                let mut text = std::fs::read_to_string(path)?;
                text.push_str(&format!("{pid}\n"));
                std::fs::write(path, text)
            }
            "cgroup.kill" => {
                let pids = self.live_pids(&dir.join("cgroup.procs"));
                let mut st = self.state.lock().unwrap();
                for p in pids {
                    st.alive.remove(&p);
                    st.killed.push(p);
                }
                Ok(())
            }
            "cgroup.subtree_control" => {
                let busy = self
                    .state
                    .lock()
                    .unwrap()
                    .internal_rule
                    .iter()
                    .any(|d| d == dir)
                    && !self.live_pids(&dir.join("cgroup.procs")).is_empty();
                if busy {
                    return Err(err(libc::EBUSY));
                }
                let available = std::fs::read_to_string(dir.join("cgroup.controllers"))?;
                let mut enabled: Vec<String> = std::fs::read_to_string(path)?
                    .split_whitespace()
                    .map(String::from)
                    .collect();
                for tok in data.split_whitespace() {
                    let c = tok.strip_prefix('+').ok_or_else(|| err(libc::EINVAL))?;
                    if !available.split_whitespace().any(|a| a == c) {
                        return Err(err(libc::ENOENT));
                    }
                    if !enabled.iter().any(|e| e == c) {
                        enabled.push(c.to_string());
                    }
                }
                std::fs::write(path, enabled.join(" "))
            }
            _ => std::fs::write(path, data),
        }
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        if self.denied(path) {
            return Err(err(libc::EACCES));
        }
        std::fs::create_dir(path)?;
        let parent = path.parent().unwrap();
        for entry in std::fs::read_dir(parent)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                let name = entry.file_name();
                let content = match name.to_str().unwrap() {
                    "cgroup.procs" | "cgroup.subtree_control" => String::new(),
                    "cgroup.controllers" => {
                        std::fs::read_to_string(parent.join("cgroup.subtree_control"))?
                    }
                    _ => std::fs::read_to_string(entry.path())?,
                };
                std::fs::write(path.join(name), content)?;
            }
        }
        Ok(())
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if self.denied(path) {
            return Err(err(libc::EACCES));
        }
        std::fs::metadata(path)?;
        if !self.live_pids(&path.join("cgroup.procs")).is_empty() || !self.subdirs(path)?.is_empty()
        {
            return Err(err(libc::EBUSY));
        }
        std::fs::remove_dir_all(path)
    }
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        out.sort();
        Ok(out)
    }
    fn writable(&self, path: &Path) -> bool {
        !self.denied(path)
    }
    fn kill(&self, pid: i32, _procs: &Path) -> io::Result<()> {
        let mut st = self.state.lock().unwrap();
        if st.alive.remove(&pid) {
            st.killed.push(pid);
            Ok(())
        } else {
            Err(err(libc::ESRCH))
        }
    }
    fn alive(&self, pid: i32) -> bool {
        self.state.lock().unwrap().alive.contains(&pid)
    }
}

/// This VM's layout: v1 controllers at `<root>/<controller>`, memory nested under
/// `/process_api/e820`, a cgroup2 at `unified/` with only `hugetlb`.
pub const HYBRID_PROC: &str = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n\
    4:memory:/process_api/e820\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

pub fn hybrid_tree(fs: &FakeFs) {
    fs.cgroup(
        "unified",
        &[
            ("cgroup.controllers", "hugetlb"),
            ("cgroup.subtree_control", ""),
            ("cgroup.procs", ""),
        ],
    );
    fs.cgroup("memory", &[("cgroup.procs", "")]);
    fs.cgroup(
        "memory/process_api/e820",
        &[
            ("cgroup.procs", ""),
            ("memory.limit_in_bytes", "9223372036854771712"),
            ("memory.memsw.limit_in_bytes", "9223372036854771712"),
            ("memory.kmem.tcp.limit_in_bytes", "9223372036854771712"),
            ("memory.max_usage_in_bytes", "0"),
            (
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
            ),
        ],
    );
    fs.cgroup("pids", &[("cgroup.procs", ""), ("pids.max", "max")]);
    fs.cgroup(
        "cpu",
        &[
            ("cgroup.procs", ""),
            ("cpu.cfs_period_us", "100000"),
            ("cpu.cfs_quota_us", "-1"),
        ],
    );
    fs.cgroup("cpuacct", &[("cgroup.procs", ""), ("cpuacct.usage", "0")]);
}

/// A pure v2 host; cordon runs in `user.slice/cordon.scope`, which has the controllers
/// available (delegated) but not yet enabled for its children.
pub const V2_PROC: &str = "0::/user.slice/cordon.scope\n";

pub fn v2_tree(fs: &FakeFs) -> PathBuf {
    fs.cgroup(
        "",
        &[
            ("cgroup.controllers", "cpuset cpu io memory pids"),
            ("cgroup.subtree_control", "cpu memory pids"),
        ],
    );
    fs.cgroup(
        "user.slice",
        &[
            ("cgroup.controllers", "cpu memory pids"),
            ("cgroup.subtree_control", "cpu memory pids"),
        ],
    );
    fs.cgroup(
        "user.slice/cordon.scope",
        &[
            ("cgroup.controllers", "cpu memory pids"),
            ("cgroup.subtree_control", ""),
            ("cgroup.procs", ""),
            ("cgroup.kill", ""),
            ("memory.max", "max"),
            ("memory.swap.max", "max"),
            ("memory.peak", "0"),
            (
                "memory.events",
                "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
            ),
            ("pids.max", "max"),
            ("cpu.max", "max 100000"),
            ("cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"),
        ],
    )
}

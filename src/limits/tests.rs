//! Unit tests on fake cgroup trees (see `fake.rs` for what the fake emulates).

use super::fake::{FakeFs, HYBRID_PROC, V2_PROC, hybrid_tree, v2_tree};
use super::*;
use std::time::Duration;

const PID: u32 = 4242;

fn limits() -> Limits {
    Limits {
        memory: Some(64 << 20),
        cpus: Some(1.5),
        pids: Some(32),
        cpu_time: Some(Duration::from_millis(1200)),
        ..Limits::default()
    }
}

fn fake() -> Arc<FakeFs> {
    Arc::new(FakeFs::new())
}

fn prep(fs: &Arc<FakeFs>, proc: &str, choice: BackendChoice) -> Result<Prepared, LimitsError> {
    prepare_with(fs.clone(), &fs.host(proc, PID), &limits(), choice, "r1")
}

#[test]
fn layout_detects_hybrid_v2_and_v1() {
    let fs = fake();
    hybrid_tree(&fs);
    let l = Layout::discover(fs.as_ref(), &fs.host(HYBRID_PROC, PID)).unwrap();
    assert_eq!(l.version, CgroupVersion::Hybrid);
    assert_eq!(l.v2.as_ref().unwrap().own, fs.root().join("unified"));
    assert_eq!(
        l.v1["memory"].own,
        fs.root().join("memory/process_api/e820")
    );
    assert_eq!(l.v1["pids"].own, fs.root().join("pids"));
    assert_eq!(l.v1["cpuacct"].mount, fs.root().join("cpuacct"));

    let fs = fake();
    v2_tree(&fs);
    let l = Layout::discover(fs.as_ref(), &fs.host(V2_PROC, PID)).unwrap();
    assert_eq!(l.version, CgroupVersion::V2);
    assert_eq!(
        l.v2.as_ref().unwrap().own,
        fs.root().join("user.slice/cordon.scope")
    );
    assert!(l.v1.is_empty());

    // Pure v1 with the cpu,cpuacct co-mount.
    let fs = fake();
    for dir in ["memory", "memory/m", "pids", "cpu,cpuacct", "cpu,cpuacct/c"] {
        fs.cgroup(dir, &[("cgroup.procs", "")]);
    }
    let l = Layout::discover(
        fs.as_ref(),
        &fs.host("3:cpu,cpuacct:/c\n2:memory:/m\n1:pids:/\n", PID),
    )
    .unwrap();
    assert_eq!(l.version, CgroupVersion::V1);
    assert_eq!(l.v1["cpu"].own, fs.root().join("cpu,cpuacct/c"));
    assert_eq!(l.v1["cpuacct"].own, l.v1["cpu"].own);
}

#[test]
fn auto_on_v2_writes_the_v2_files() {
    let fs = fake();
    let own = v2_tree(&fs);
    let p = prep(&fs, V2_PROC, BackendChoice::Auto).unwrap();
    let cg = p.cgroup.as_ref().unwrap();
    assert_eq!(cg.backend(), Backend::CgroupV2);
    let dir = own.join(format!("cordon-{PID}-r1"));
    assert_eq!(cg.dirs(), vec![dir.clone()]);
    assert_eq!(
        fs.get(&own.join("cgroup.subtree_control")),
        "memory pids cpu"
    );
    assert_eq!(fs.get(&dir.join("memory.max")), (64u64 << 20).to_string());
    assert_eq!(fs.get(&dir.join("memory.swap.max")), "0");
    assert_eq!(fs.get(&dir.join("pids.max")), "32");
    assert_eq!(fs.get(&dir.join("cpu.max")), "150000 100000");
    assert!(
        p.report
            .backend_note
            .clone()
            .unwrap_or_default()
            .starts_with("cgroup v2 ("),
        "{}",
        p.report.backend_note.clone().unwrap_or_default()
    );
    assert_eq!(
        p.report.memory_bytes.as_ref().unwrap().enforcement,
        Enforcement::CgroupV2
    );
    assert_eq!(
        p.report.cpus.as_ref().unwrap().enforcement,
        Enforcement::CgroupV2
    );
    assert_eq!(
        p.report.pids.as_ref().unwrap().enforcement,
        Enforcement::CgroupV2
    );
    // The supervisor holds it with the cgroup's counter (and RLIMIT_CPU per process).
    assert_eq!(
        p.report.cpu_time_ms.as_ref().unwrap().enforcement,
        Enforcement::CgroupV2
    );
    assert!(!p.rlimits.iter().any(|r| r.resource == libc::RLIMIT_DATA));

    // attach puts the pid in the leaf only (cordon's own cgroup stays empty of the sandbox).
    fs.spawn(777);
    cg.attach(777).unwrap();
    assert_eq!(fs.get(&dir.join("cgroup.procs")), "777\n");
    assert_eq!(fs.get(&own.join("cgroup.procs")), "");
}

#[test]
fn v2_alone_in_own_cgroup_moves_itself_into_a_leaf() {
    let fs = fake();
    let own = v2_tree(&fs);
    fs.internal_rule(&own);
    fs.spawn(PID as i32);
    fs.set(&own.join("cgroup.procs"), &format!("{PID}\n"));
    let p = prep(&fs, V2_PROC, BackendChoice::Auto).unwrap();
    let cg = p
        .cgroup
        .as_ref()
        .expect("cgroup v2 after moving into a leaf");
    assert_eq!(cg.backend(), Backend::CgroupV2);
    let leaf = own.join(format!("cordon-{PID}-supervisor"));
    assert_eq!(fs.get(&leaf.join("cgroup.procs")), format!("{PID}\n"));
    assert_eq!(fs.get(&own.join("cgroup.procs")), "", "own must be empty");
    assert_eq!(
        fs.get(&own.join("cgroup.subtree_control")),
        "memory pids cpu"
    );
    let b = p.report.backend_note.clone().unwrap_or_default();
    assert!(b.contains("moved itself into the leaf"), "{b}");
    assert!(b.contains(&leaf.display().to_string()), "{b}");
    // The sandbox cgroup is a sibling of the leaf, and removable; the leaf stays (cordon is in
    // it) and is not stale while cordon lives.
    let dir = own.join(format!("cordon-{PID}-r1"));
    assert_eq!(cg.dirs(), vec![dir.clone()]);
    drop(p);
    assert!(!dir.exists());
    let layout = Layout::discover(fs.as_ref(), &fs.host(V2_PROC, PID)).unwrap();
    assert!(gc_stale(fs.as_ref(), &layout, PID).is_empty());
    assert!(leaf.exists());

    // A second run in the same process: own is empty, the controllers are on: no move.
    let p = prep(&fs, V2_PROC, BackendChoice::Auto).unwrap();
    assert!(p.cgroup.is_some());
    let b = p.report.backend_note.clone().unwrap_or_default();
    assert!(!b.contains("moved itself"), "{b}");
}

#[test]
fn v2_enable_failure_after_the_move_moves_cordon_back() {
    let fs = fake();
    let own = v2_tree(&fs);
    fs.internal_rule(&own);
    fs.spawn(PID as i32);
    fs.set(&own.join("cgroup.procs"), &format!("{PID}\n"));
    fs.fail_writes(&own.join("cgroup.subtree_control"), libc::EOPNOTSUPP);
    let err = prep(&fs, V2_PROC, BackendChoice::CgroupV2)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("EOPNOTSUPP") && err.contains("cgroup.subtree_control"),
        "{err}"
    );
    assert_eq!(fs.get(&own.join("cgroup.procs")), format!("{PID}\n"));
    assert!(
        fs.subdirs(&own).unwrap().is_empty(),
        "the leaf must be gone"
    );
}

#[test]
fn v2_other_processes_in_own_cgroup_fall_back_with_reason_or_fail_when_forced() {
    let fs = fake();
    let own = v2_tree(&fs);
    fs.internal_rule(&own);
    fs.spawn(PID as i32);
    fs.spawn(77);
    fs.set(&own.join("cgroup.procs"), &format!("77\n{PID}\n"));
    // No v1 either: auto ends at rlimit, naming the other pid and the fix.
    let p = prep(&fs, V2_PROC, BackendChoice::Auto).unwrap();
    assert!(p.cgroup.is_none());
    let b = &p.report.backend_note.clone().unwrap_or_default();
    assert!(
        b.starts_with("rlimit (cgroup v2 cannot enable controllers"),
        "{b}"
    );
    assert!(
        b.contains("1 other process") && b.contains("pids 77 besides cordon"),
        "{b}"
    );
    assert!(b.contains("cgroup v1 has no memory controller"), "{b}");
    assert!(!own.join(format!("cordon-{PID}-r1")).exists());
    assert!(!own.join(format!("cordon-{PID}-supervisor")).exists());
    assert_eq!(fs.get(&own.join("cgroup.procs")), format!("77\n{PID}\n"));

    let err = prep(&fs, V2_PROC, BackendChoice::CgroupV2).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            LimitsError::BackendUnavailable {
                backend: "cgroup-v2",
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("pids 77") && msg.contains("fix: cgroup v2 forbids"),
        "{msg}"
    );
    assert!(msg.contains("Delegate=yes"), "{msg}");
}

#[test]
fn v2_enable_ebusy_names_errno_and_fix() {
    // The kernel refuses even though cordon saw no other process (one arrived meanwhile).
    let fs = fake();
    let own = v2_tree(&fs);
    fs.internal_rule(&own);
    fs.spawn(PID as i32);
    fs.set(&own.join("cgroup.procs"), &format!("{PID}\n"));
    let leaf = own.join(format!("cordon-{PID}-supervisor"));
    fs.deny(&leaf);
    let err = prep(&fs, V2_PROC, BackendChoice::CgroupV2).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("EACCES") && msg.contains("cordon-4242-supervisor"),
        "{msg}"
    );
}

#[test]
fn v2_controllers_not_delegated_names_the_fix() {
    let fs = fake();
    let own = v2_tree(&fs);
    fs.set(&own.join("cgroup.controllers"), "memory");
    let err = prep(&fs, V2_PROC, BackendChoice::CgroupV2)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("has no pids/cpu controller delegated"),
        "{err}"
    );
    assert!(err.contains("Delegate=yes"), "{err}");
}

#[test]
fn v2_subtree_control_not_delegated_is_detected_before_any_write() {
    let fs = fake();
    let own = v2_tree(&fs);
    let subtree = own.join("cgroup.subtree_control");
    fs.deny(&subtree);
    let pr = probe_with(fs.as_ref(), &fs.host(V2_PROC, PID));
    assert_eq!(pr.auto_backend, "rlimit");
    let reason = pr.cgroup_v2.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("not writable by uid 1000") && reason.contains("cgroup.subtree_control"),
        "{reason}"
    );
    let p = prep(&fs, V2_PROC, BackendChoice::Auto).unwrap();
    assert!(p.cgroup.is_none());
    assert!(fs.subdirs(&own).unwrap().is_empty(), "nothing created");
    let b = p.report.backend_note.clone().unwrap_or_default();
    assert!(b.contains("fix: run cordon in a delegated cgroup"), "{b}");

    // Already enabled by whoever delegated it: the file need not be writable.
    fs.set(&subtree, "memory pids cpu");
    let pr = probe_with(fs.as_ref(), &fs.host(V2_PROC, PID));
    assert_eq!(pr.auto_backend, "cgroup-v2", "{:?}", pr.cgroup_v2);
}

#[test]
fn hybrid_auto_picks_v1_and_writes_the_v1_files() {
    let fs = fake();
    hybrid_tree(&fs);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::Auto).unwrap();
    let cg = p.cgroup.as_ref().unwrap();
    assert_eq!(cg.backend(), Backend::CgroupV1);
    let name = format!("cordon-{PID}-r1");
    let mem = fs.root().join("memory/process_api/e820").join(&name);
    let pids = fs.root().join("pids").join(&name);
    let cpu = fs.root().join("cpu").join(&name);
    let acct = fs.root().join("cpuacct").join(&name);
    assert_eq!(
        cg.dirs(),
        vec![mem.clone(), pids.clone(), cpu.clone(), acct.clone()]
    );
    assert_eq!(
        fs.get(&mem.join("memory.limit_in_bytes")),
        (64u64 << 20).to_string()
    );
    assert_eq!(
        fs.get(&mem.join("memory.memsw.limit_in_bytes")),
        (64u64 << 20).to_string()
    );
    assert_eq!(
        fs.get(&mem.join("memory.kmem.tcp.limit_in_bytes")),
        (64u64 << 20).to_string(),
        "socket buffers are held apart"
    );
    assert_eq!(fs.get(&pids.join("pids.max")), "32");
    assert_eq!(fs.get(&cpu.join("cpu.cfs_period_us")), "100000");
    assert_eq!(fs.get(&cpu.join("cpu.cfs_quota_us")), "150000");
    let b = &p.report.backend_note.clone().unwrap_or_default();
    assert!(
        b.starts_with("cgroup v1 (") && b.contains("skipped: cgroup v2 has no memory/pids/cpu"),
        "{b}"
    );
    assert_eq!(
        p.report.memory_bytes.as_ref().unwrap().enforcement,
        Enforcement::CgroupV1
    );
    assert!(
        p.report
            .memory_bytes
            .as_ref()
            .unwrap()
            .note
            .as_ref()
            .unwrap()
            .contains("memsw")
    );
    let note = memory_note(&p);
    assert!(
        note.contains("socket buffers held to the same size apart"),
        "{note}"
    );

    fs.spawn(900);
    cg.attach(900).unwrap();
    for d in [&mem, &pids, &cpu, &acct] {
        assert_eq!(fs.get(&d.join("cgroup.procs")), "900\n", "{}", d.display());
    }
}

/// The memory note of the v1 backend on the hybrid tree without the control file `file`.
fn v1_memory_note_without(file: &str) -> String {
    let fs = fake();
    hybrid_tree(&fs);
    std::fs::remove_file(fs.root().join("memory/process_api/e820").join(file)).unwrap();
    let p = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1).unwrap();
    memory_note(&p)
}

/// The note of the memory limit's report.
fn memory_note(p: &Prepared) -> String {
    p.report
        .memory_bytes
        .as_ref()
        .unwrap()
        .note
        .clone()
        .unwrap()
}

#[test]
fn v1_without_memsw_says_swap_is_not_limited() {
    let note = v1_memory_note_without("memory.memsw.limit_in_bytes");
    assert!(note.contains("swap not limited"), "{note}");
}

#[test]
fn v1_without_kmem_tcp_says_socket_buffers_are_not_limited() {
    let note = v1_memory_note_without("memory.kmem.tcp.limit_in_bytes");
    assert!(note.contains("socket buffers NOT limited"), "{note}");
}

#[test]
fn v1_not_writable_falls_back_to_rlimit_with_the_reason() {
    let fs = fake();
    hybrid_tree(&fs);
    let own = fs.root().join("memory/process_api/e820");
    fs.deny(&own);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::Auto).unwrap();
    assert!(p.cgroup.is_none());
    let b = &p.report.backend_note.clone().unwrap_or_default();
    assert!(
        b.starts_with("rlimit (cgroup v2 has no memory/pids/cpu controller (bound to cgroup v1)"),
        "{b}"
    );
    assert!(
        b.contains(&format!(
            "cgroup v1 not writable by uid 1000: write to {}: EACCES",
            own.display()
        )),
        "{b}"
    );
    // One fix for both (each backend's own would say "run as root" twice), and all of it:
    // cgroup v1 as root, or cgroup v2 booted, where a user's cgroup can be delegated.
    assert!(
        b.ends_with(&format!(
            "EACCES (Permission denied); fix: {})",
            host::fixes::V1_HOST_UNPRIVILEGED
        )),
        "{b}"
    );
    assert!(!b.contains("(fix:"), "{b}");
    assert_eq!(b.matches("run as root").count(), 1, "{b}");
    for fix in ["cgroup_no_v1=all", "cannot be delegated"] {
        assert!(b.contains(fix), "{b}");
    }
    // rlimit fallbacks, each saying what it is.
    let r = &p.report;
    assert_eq!(
        r.memory_bytes.as_ref().unwrap().enforcement,
        Enforcement::Rlimit
    );
    assert!(
        r.memory_bytes
            .as_ref()
            .unwrap()
            .note
            .as_ref()
            .unwrap()
            .starts_with("RLIMIT_DATA per process plus the sandbox's sum polled every 20-50 ms")
    );
    assert_eq!(r.pids.as_ref().unwrap().enforcement, Enforcement::Rlimit);
    assert_eq!(r.cpus.as_ref().unwrap().enforcement, Enforcement::Affinity);
    // 1.5 CPUs: two whole ones where there are two.
    assert!(
        p.cpu_pin
            .as_ref()
            .is_some_and(|c| (1..=2).contains(&c.len()))
    );
    assert!(
        r.cpus
            .as_ref()
            .unwrap()
            .note
            .as_ref()
            .unwrap()
            .contains("run as root")
    );
    assert!(p.rlimits.contains(&Rlimit {
        resource: libc::RLIMIT_DATA,
        value: 64 << 20
    }));
    assert!(p.rlimits.contains(&Rlimit {
        resource: libc::RLIMIT_NPROC,
        value: 32
    }));
    assert!(p.rlimits.contains(&Rlimit {
        resource: libc::RLIMIT_CPU,
        value: 2
    }));

    let err = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cgroup-v1 limits backend was requested but is unavailable"),
        "{err}"
    );
    assert!(
        err.contains("EACCES") && err.contains("fix: cgroup v1 cannot be delegated"),
        "{err}"
    );
}

#[test]
fn v1_mkdir_failure_half_way_rolls_back() {
    let fs = fake();
    hybrid_tree(&fs);
    // access() says yes but mkdir in the cpu hierarchy fails (say, a read-only bind).
    let name = format!("cordon-{PID}-r1");
    fs.deny(&fs.root().join("cpu").join(&name));
    let err = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("create the cgroup directory") && err.contains("EACCES"),
        "{err}"
    );
    assert!(
        !fs.root()
            .join("memory/process_api/e820")
            .join(&name)
            .exists()
    );
    assert!(!fs.root().join("pids").join(&name).exists());
}

#[test]
fn forced_v2_on_hybrid_is_an_error() {
    let fs = fake();
    hybrid_tree(&fs);
    let err = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV2)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cgroup-v2") && err.contains("systemd.unified_cgroup_hierarchy=1"),
        "{err}"
    );
    // The fake caller is not root: cgroup v1 needs root.
    assert!(err.contains("run as root to use cgroup v1"), "{err}");
    // Root has cgroup v1 already: it is told so, not to run as root.
    let mut host = fs.host(HYBRID_PROC, PID);
    host.uid = 0;
    let err = prepare_with(fs.clone(), &host, &limits(), BackendChoice::CgroupV2, "r1")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("as root, cordon uses those v1 hierarchies") && !err.contains("run as root"),
        "{err}"
    );
    // And nothing was created anywhere.
    assert!(
        !fs.root()
            .join("pids")
            .join(format!("cordon-{PID}-r1"))
            .exists()
    );
}

#[test]
fn forced_rlimit_touches_no_cgroup() {
    let fs = fake();
    hybrid_tree(&fs);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::Rlimit).unwrap();
    assert!(p.cgroup.is_none());
    assert_eq!(
        p.report.backend_note.clone().unwrap_or_default(),
        "rlimit (forced)"
    );
    assert_eq!(
        fs.subdirs(&fs.root().join("pids")).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn invalid_run_id_and_cpus_are_rejected() {
    let fs = fake();
    hybrid_tree(&fs);
    let host = fs.host(HYBRID_PROC, PID);
    for bad in ["", "../x", "a/b", ".hidden"] {
        let e = prepare_with(fs.clone(), &host, &limits(), BackendChoice::Auto, bad).unwrap_err();
        assert!(
            matches!(e, LimitsError::Invalid { what: "run id", .. }),
            "{bad}: {e}"
        );
    }
    let l = Limits {
        cpus: Some(0.0),
        ..limits()
    };
    assert!(prepare_with(fs.clone(), &host, &l, BackendChoice::Auto, "ok").is_err());
}

#[test]
fn report_fills_every_field() {
    let fs = fake();
    v2_tree(&fs);
    let p = prep(&fs, V2_PROC, BackendChoice::Auto).unwrap();
    let r = &p.report;
    assert_eq!(
        r.wall_time_ms.as_ref().unwrap().enforcement,
        Enforcement::Supervisor
    );
    assert_eq!(r.wall_time_ms.as_ref().unwrap().value, Some(30_000.0));
    assert_eq!(
        r.output_bytes.as_ref().unwrap().enforcement,
        Enforcement::Supervisor
    );
    assert_eq!(
        r.workspace_bytes.as_ref().unwrap().enforcement,
        Enforcement::Tmpfs
    );
    assert_eq!(
        r.tmp_bytes.as_ref().unwrap().enforcement,
        Enforcement::Tmpfs
    );
    assert_eq!(
        r.file_size_bytes.as_ref().unwrap().enforcement,
        Enforcement::Rlimit
    );
    assert_eq!(r.open_files.as_ref().unwrap().value, Some(1024.0));
    assert_eq!(r.cpu_time_ms.as_ref().unwrap().value, Some(1200.0));
    assert_eq!(r.cpus.as_ref().unwrap().value, Some(1.5));
    let json = serde_json::to_string(r).unwrap();
    assert!(
        json.contains("\"wallTimeMs\"") && json.contains("\"cgroup-v2\""),
        "{json}"
    );
}

#[test]
fn v2_metrics_are_parsed() {
    let fs = fake();
    v2_tree(&fs);
    let p = prep(&fs, V2_PROC, BackendChoice::CgroupV2).unwrap();
    let cg = p.cgroup.as_ref().unwrap();
    let dir = &cg.dirs()[0];
    fs.set(&dir.join("memory.peak"), "67108864\n");
    fs.set(
        &dir.join("cpu.stat"),
        "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\nnr_periods 3\n",
    );
    fs.set(
        &dir.join("memory.events"),
        "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n",
    );
    fs.set(&dir.join("pids.events"), "max 7\n");
    assert_eq!(cg.metrics().pids_limit_hits, Some(7));
    fs.set(&dir.join("pids.events.local"), "max 5\n");
    let m = cg.metrics();
    assert_eq!(m.peak_memory, Some(64 << 20));
    assert_eq!(m.cpu_time, Some(Duration::from_micros(1_234_567)));
    assert_eq!(m.oom_kills, Some(1));
    assert_eq!(m.pids_limit_hits, Some(5), "the local count first");
    assert_eq!(m.source, Some(MetricSource::CgroupV2));
    // memory.peak is absent before Linux 5.19: no value, not zero.
    std::fs::remove_file(dir.join("memory.peak")).unwrap();
    assert_eq!(cg.metrics().peak_memory, None);
}

#[test]
fn v1_metrics_are_parsed() {
    let fs = fake();
    hybrid_tree(&fs);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1).unwrap();
    let cg = p.cgroup.as_ref().unwrap();
    let d = cg.dirs();
    fs.set(&d[0].join("memory.max_usage_in_bytes"), "70000640\n");
    fs.set(
        &d[0].join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
    );
    fs.set(&d[3].join("cpuacct.usage"), "2500000000\n");
    assert!(d[1].parent().unwrap().ends_with("pids"), "{d:?}");
    fs.set(&d[1].join("pids.events"), "max 41\n");
    let m = cg.metrics();
    assert_eq!(m.peak_memory, Some(70_000_640));
    assert_eq!(m.oom_kills, Some(3));
    assert_eq!(m.pids_limit_hits, Some(41));
    assert_eq!(m.cpu_time, Some(Duration::from_millis(2500)));
    assert_eq!(m.source, Some(MetricSource::CgroupV1));
}

#[test]
fn keyed_value_matches_whole_keys() {
    let t = "oom_kill_disable 0\nunder_oom 1\noom_kill 5\n";
    assert_eq!(keyed_value(t, "oom_kill"), Some(5));
    assert_eq!(keyed_value(t, "under_oom"), Some(1));
    assert_eq!(keyed_value(t, "oom"), None);
    assert_eq!(keyed_value("usage_usec x\n", "usage_usec"), None);
}

#[test]
fn kill_and_remove_v1_signal_every_pid_then_rmdir() {
    let fs = fake();
    hybrid_tree(&fs);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1).unwrap();
    let cg = p.cgroup.unwrap();
    for pid in [501, 502, 503] {
        fs.spawn(pid);
        cg.attach(pid).unwrap();
    }
    let dirs = cg.dirs();
    cg.kill();
    let mut killed = fs.killed();
    killed.sort();
    assert_eq!(killed, vec![501, 502, 503]);
    cg.remove().unwrap();
    for d in dirs {
        assert!(!d.exists(), "{}", d.display());
    }
}

/// After the run (init reaped) the cgroup is removed at once; a process still in it is
/// killed first, and the removal retried.
#[test]
fn remove_emptied_removes_and_kills_only_what_is_left() {
    for v2 in [false, true] {
        let fs = fake();
        let p = if v2 {
            v2_tree(&fs);
            prep(&fs, V2_PROC, BackendChoice::CgroupV2)
        } else {
            hybrid_tree(&fs);
            prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1)
        };
        let cg = p.unwrap().cgroup.unwrap();
        let dirs = cg.dirs();
        let reads = fs.procs_reads();
        cg.remove_emptied().unwrap();
        assert!(fs.killed().is_empty(), "v2 {v2}");
        // Removed without reading who is in it first.
        assert_eq!(fs.procs_reads(), reads, "v2 {v2}");
        assert!(dirs.iter().all(|d| !d.exists()), "v2 {v2}: {dirs:?}");

        let p = if v2 {
            prep(&fs, V2_PROC, BackendChoice::CgroupV2)
        } else {
            prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1)
        };
        let cg = p.unwrap().cgroup.unwrap();
        fs.spawn(901);
        cg.attach(901).unwrap();
        let dirs = cg.dirs();
        cg.remove_emptied().unwrap();
        assert_eq!(fs.killed(), vec![901], "v2 {v2}");
        assert!(dirs.iter().all(|d| !d.exists()), "v2 {v2}: {dirs:?}");
    }
}

#[test]
fn kill_v2_uses_cgroup_kill() {
    let fs = fake();
    v2_tree(&fs);
    let p = prep(&fs, V2_PROC, BackendChoice::CgroupV2).unwrap();
    let cg = p.cgroup.unwrap();
    fs.spawn(601);
    cg.attach(601).unwrap();
    cg.kill();
    assert_eq!(fs.killed(), vec![601]);
    let dir = cg.dirs()[0].clone();
    cg.remove().unwrap();
    assert!(!dir.exists());
}

#[test]
fn remove_with_live_tasks_reports_path_and_ebusy() {
    let fs = fake();
    v2_tree(&fs);
    let p = prep(&fs, V2_PROC, BackendChoice::CgroupV2).unwrap();
    let mut cg = p.cgroup.unwrap();
    cg.remove_timeout = Duration::from_millis(30);
    fs.spawn(700);
    cg.attach(700).unwrap();
    let dir = cg.dirs()[0].clone();
    let err = cg.remove().unwrap_err().to_string();
    assert!(
        err.contains("remove the cgroup") && err.contains("EBUSY"),
        "{err}"
    );
    assert!(err.contains(&dir.display().to_string()), "{err}");
    assert!(dir.exists());
}

#[test]
fn dropping_a_cgroup_kills_and_removes_it() {
    let fs = fake();
    hybrid_tree(&fs);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1).unwrap();
    let cg = p.cgroup.unwrap();
    fs.spawn(801);
    cg.attach(801).unwrap();
    let dirs = cg.dirs();
    drop(cg);
    assert_eq!(fs.killed(), vec![801]);
    assert!(dirs.iter().all(|d| !d.exists()));
}

#[test]
fn kill_never_signals_cordon_itself() {
    let fs = fake();
    hybrid_tree(&fs);
    let p = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV1).unwrap();
    let mut cg = p.cgroup.unwrap();
    cg.remove_timeout = Duration::from_millis(10);
    fs.spawn(PID as i32);
    cg.attach(PID as i32).unwrap();
    assert!(
        kill_loop(fs.as_ref(), &[cg.dirs()[0].join("cgroup.procs")], PID, 1),
        "nothing else to kill"
    );
    cg.kill();
    assert!(fs.killed().is_empty());
    // Leave cordon's "own" pid out of the way so Drop can finish.
    fs.kill(PID as i32, Path::new("cgroup.procs")).unwrap();
}

#[test]
fn a_pid_is_killed_only_while_its_cgroup_lists_it() {
    // RealFs pins the process (a pidfd) and reads the cgroup's list again before the signal:
    // a pid that left the cgroup (and may since be another process's) is not signalled.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let dir = tempfile::tempdir().unwrap();
    let procs = dir.path().join("cgroup.procs");
    std::fs::write(&procs, "1\n2\n").unwrap();
    let e = RealFs.kill(pid, &procs).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "a pid not listed was killed"
    );
    std::fs::write(&procs, format!("1\n{pid}\n")).unwrap();
    RealFs.kill(pid, &procs).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
}

/// Sets a directory's mtime [`STALE_MIN_AGE`] and a minute into the past.
fn age_dir(dir: &Path) {
    if !dir.exists() {
        return;
    }
    std::fs::File::open(dir)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - STALE_MIN_AGE - Duration::from_secs(60))
        .unwrap();
}

#[test]
fn stale_gc_removes_only_dead_owners_groups() {
    let fs = fake();
    hybrid_tree(&fs);
    let mem = fs.root().join("memory/process_api/e820");
    let pids = fs.root().join("pids");
    fs.spawn(222);
    for parent in [&mem, &pids] {
        for name in [
            "cordon-111-a",
            "cordon-222-b",
            &format!("cordon-{PID}-c"),
            "cordon-x-d",
            "other",
            "cordon-333-",
        ] {
            fs.mkdir(&parent.join(name)).unwrap();
        }
    }
    // A dead owner's group that still holds a live process is left alone (EBUSY).
    fs.mkdir(&pids.join("cordon-444-busy")).unwrap();
    fs.spawn(9000);
    fs.write(&pids.join("cordon-444-busy/cgroup.procs"), "9000")
        .unwrap();

    let layout = Layout::discover(fs.as_ref(), &fs.host(HYBRID_PROC, PID)).unwrap();
    // Made just now: an owner not seen alive may be a cordon of another pid namespace about
    // to move its sandbox in. Nothing is removed.
    assert!(gc_stale(fs.as_ref(), &layout, PID).is_empty());
    for parent in [&mem, &pids] {
        for name in ["cordon-111-a", "cordon-222-b", "cordon-444-busy"] {
            age_dir(&parent.join(name));
        }
    }
    let removed = gc_stale(fs.as_ref(), &layout, PID);
    assert_eq!(
        removed,
        vec![mem.join("cordon-111-a"), pids.join("cordon-111-a")]
    );
    for parent in [&mem, &pids] {
        assert!(parent.join("cordon-222-b").exists());
        assert!(parent.join(format!("cordon-{PID}-c")).exists());
        assert!(parent.join("cordon-x-d").exists() && parent.join("other").exists());
    }
    assert!(pids.join("cordon-444-busy").exists());
    assert!(fs.killed().is_empty(), "GC never signals");

    // prepare hands the same GC to the launcher, which runs it once the sandbox is under way.
    fs.mkdir(&pids.join("cordon-112-z")).unwrap();
    age_dir(&pids.join("cordon-112-z"));
    let p = prep(&fs, HYBRID_PROC, BackendChoice::Rlimit).unwrap();
    assert!(p.stale_gc.is_none(), "forced rlimit leaves cgroups alone");
    let mut p = prep(&fs, HYBRID_PROC, BackendChoice::Auto).unwrap();
    assert!(
        pids.join("cordon-112-z").exists(),
        "prepare itself removes nothing (the GC is off the start's path)"
    );
    let gc = p.stale_gc.take().expect("a cgroup layout brings a GC");
    assert_eq!(gc.run(), vec![pids.join("cordon-112-z")]);
    assert!(!pids.join("cordon-112-z").exists());
}

#[test]
fn a_forced_backend_that_fails_still_collects_stale_groups() {
    // The launcher never gets a GC to run when prepare fails: prepare runs it itself.
    let fs = fake();
    hybrid_tree(&fs);
    let pids = fs.root().join("pids");
    fs.mkdir(&pids.join("cordon-111-a")).unwrap();
    age_dir(&pids.join("cordon-111-a"));
    let err = prep(&fs, HYBRID_PROC, BackendChoice::CgroupV2).unwrap_err();
    assert!(
        matches!(err, LimitsError::BackendUnavailable { .. }),
        "{err}"
    );
    assert!(!pids.join("cordon-111-a").exists());
}

#[test]
fn owner_pid_parses_only_cordon_names() {
    assert_eq!(owner_pid("cordon-12-abc"), Some(12));
    assert_eq!(owner_pid("cordon-12-a-b"), Some(12));
    assert_eq!(owner_pid("cordon-12-"), None);
    assert_eq!(owner_pid("cordon-x-1"), None);
    assert_eq!(owner_pid("cordon12-1"), None);
}

#[test]
fn probe_reports_hybrid_and_fixes() {
    let fs = fake();
    hybrid_tree(&fs);
    fs.deny(&fs.root().join("memory/process_api/e820"));
    let pr = probe_with(fs.as_ref(), &fs.host(HYBRID_PROC, PID));
    assert_eq!(pr.version, CgroupVersion::Hybrid);
    assert_eq!(pr.auto_backend, "rlimit");
    let mem = &pr.controllers[0];
    assert_eq!(
        (mem.name, mem.exists, mem.hierarchy, mem.writable),
        ("memory", true, Some("v1"), false)
    );
    assert!(mem.fix.as_ref().unwrap().contains("run as root"));
    let pids = &pr.controllers[1];
    assert_eq!(
        (pids.name, pids.writable, pids.fix.is_none()),
        ("pids", true, true)
    );
    assert!(!pr.cgroup_v2.available);
    assert!(
        pr.cgroup_v2
            .fix
            .as_ref()
            .unwrap()
            .contains("systemd.unified_cgroup_hierarchy=1")
    );
    assert!(pr.cgroup_v1.reason.as_ref().unwrap().contains("EACCES"));
    let json = serde_json::to_value(&pr).unwrap();
    assert_eq!(json["version"], "hybrid");
    assert_eq!(json["controllers"][3]["name"], "cpuacct");
}

#[test]
fn probe_v2_predicts_ebusy_and_cpuacct_is_not_needed() {
    let fs = fake();
    let own = v2_tree(&fs);
    let pr = probe_with(fs.as_ref(), &fs.host(V2_PROC, PID));
    assert_eq!(pr.version, CgroupVersion::V2);
    assert_eq!(pr.auto_backend, "cgroup-v2");
    assert_eq!(pr.controllers[0].enabled_for_children, Some(false));
    assert!(
        pr.controllers[3]
            .note
            .as_ref()
            .unwrap()
            .contains("not needed on cgroup v2")
    );
    assert!(pr.controllers[3].fix.is_none());

    fs.spawn(PID as i32);
    fs.set(&own.join("cgroup.procs"), &format!("{PID}\n"));
    let pr = probe_with(fs.as_ref(), &fs.host(V2_PROC, PID));
    assert_eq!(pr.auto_backend, "cgroup-v2", "alone: cordon moves itself");
    assert!(
        pr.controllers[0]
            .note
            .as_ref()
            .unwrap()
            .contains("moves itself"),
        "{:?}",
        pr.controllers[0]
    );

    fs.spawn(78);
    fs.set(&own.join("cgroup.procs"), &format!("78\n{PID}\n"));
    let pr = probe_with(fs.as_ref(), &fs.host(V2_PROC, PID));
    assert_eq!(pr.auto_backend, "rlimit");
    assert!(
        pr.cgroup_v2.reason.as_ref().unwrap().contains("EBUSY"),
        "{:?}",
        pr.cgroup_v2
    );
    let mem = &pr.controllers[0];
    assert!(mem.note.as_ref().unwrap().contains("EBUSY"), "{mem:?}");
    assert!(
        mem.fix
            .as_ref()
            .unwrap()
            .contains("forbids enabling controllers"),
        "{mem:?}"
    );
}

/// A user manager that hands out a scope in the fake tree (or refuses with `error`).
#[derive(Debug)]
struct FakeScope {
    fs: Arc<FakeFs>,
    controllers: &'static str,
    error: Option<String>,
    calls: std::sync::Mutex<u32>,
}

const MANAGER: &str = "user.slice/user-1000.slice/user@1000.service";

impl FakeScope {
    fn new(fs: &Arc<FakeFs>, controllers: &'static str, error: Option<&str>) -> FakeScope {
        FakeScope {
            fs: fs.clone(),
            controllers,
            error: error.map(String::from),
            calls: std::sync::Mutex::new(0),
        }
    }
    fn calls(&self) -> u32 {
        *self.calls.lock().unwrap()
    }
}

impl UserScope for FakeScope {
    fn reachable(&self) -> Result<String, String> {
        Ok("unix:path=/run/user/1000/bus".to_string())
    }
    fn obtain(&self, pid: u32, run_id: &str) -> Result<Obtained, String> {
        *self.calls.lock().unwrap() += 1;
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let unit = format!("cordon-{pid}-{run_id}.scope");
        let rel = format!("{MANAGER}/app.slice/{unit}");
        // The interface files of a v2 cgroup (as in v2_tree), with the scope's controllers.
        let template = self.fs.root().join("user.slice/cordon.scope");
        let dir = self.fs.cgroup(&rel, &[]);
        for name in self.fs.files(&template) {
            let content = std::fs::read_to_string(template.join(&name)).unwrap();
            self.fs.set(&dir.join(&name), &content);
        }
        self.fs
            .set(&dir.join("cgroup.controllers"), self.controllers);
        self.fs.set(&dir.join("cgroup.subtree_control"), "");
        self.fs.set(&dir.join("cgroup.procs"), &format!("{pid}\n"));
        self.fs.internal_rule(&dir);
        Ok(Obtained {
            unit,
            proc_self_cgroup: format!("0::/{rel}\n"),
        })
    }
    fn ping(&self) -> Result<ManagerInfo, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.fs
            .cgroup(MANAGER, &[("cgroup.controllers", self.controllers)]);
        Ok(ManagerInfo {
            version: "252".to_string(),
            control_group: format!("/{MANAGER}"),
        })
    }
}

/// A pure v2 host where cordon's own cgroup (a login session's) is not delegated to it.
fn undelegated_v2(fs: &Arc<FakeFs>) -> PathBuf {
    let own = v2_tree(fs);
    fs.deny(&own);
    fs.spawn(PID as i32);
    own
}

fn prep_scope(
    fs: &Arc<FakeFs>,
    host: &HostPaths,
    choice: BackendChoice,
    scope: &FakeScope,
) -> Result<Prepared, LimitsError> {
    prepare_with_scope(fs.clone(), host, &limits(), choice, "r1", Some(scope))
}

#[test]
fn unprivileged_without_delegation_obtains_a_user_scope() {
    let fs = fake();
    let own = undelegated_v2(&fs);
    let scope = FakeScope::new(&fs, "cpu memory pids", None);
    let p = prep_scope(&fs, &fs.host(V2_PROC, PID), BackendChoice::Auto, &scope).unwrap();
    assert_eq!(scope.calls(), 1);
    let cg = p.cgroup.as_ref().expect("cgroup v2 in the scope");
    assert_eq!(cg.backend(), Backend::CgroupV2);
    let unit_dir = fs
        .root()
        .join(MANAGER)
        .join(format!("app.slice/cordon-{PID}-r1.scope"));
    let dir = unit_dir.join(format!("cordon-{PID}-r1"));
    assert_eq!(cg.dirs(), vec![dir.clone()]);
    assert_eq!(fs.get(&dir.join("memory.max")), (64u64 << 20).to_string());
    assert_eq!(fs.get(&dir.join("pids.max")), "32");
    // No internal processes: cordon moved into a leaf of the scope, then enabled the controllers.
    let leaf = unit_dir.join(format!("cordon-{PID}-supervisor"));
    assert_eq!(fs.get(&leaf.join("cgroup.procs")), format!("{PID}\n"));
    assert_eq!(
        fs.get(&unit_dir.join("cgroup.subtree_control")),
        "memory pids cpu"
    );
    assert_eq!(p.report.backend, "cgroup-v2");
    let note = p.report.backend_note.clone().unwrap_or_default();
    assert!(
        note.starts_with(&format!("cgroup v2 ({};", dir.display())),
        "{note}"
    );
    assert!(
        note.contains(&format!("transient scope cordon-{PID}-r1.scope")),
        "{note}"
    );
    assert!(
        note.contains("from the systemd user manager with Delegate=yes"),
        "{note}"
    );
    assert!(
        note.contains(&own.display().to_string()),
        "why own was not used: {note}"
    );
    assert!(
        fs.subdirs(&own).unwrap().is_empty(),
        "nothing in the undelegated cgroup"
    );
}

#[test]
fn scope_refused_falls_back_to_rlimit_with_the_bus_error_or_fails_when_forced() {
    let fs = fake();
    undelegated_v2(&fs);
    let bus_error = "Call failed: Access denied";
    let scope = FakeScope::new(&fs, "cpu memory pids", Some(bus_error));
    let p = prep_scope(&fs, &fs.host(V2_PROC, PID), BackendChoice::Auto, &scope).unwrap();
    assert!(p.cgroup.is_none());
    assert_eq!(p.report.backend, "rlimit");
    let note = p.report.backend_note.clone().unwrap_or_default();
    assert!(note.starts_with("rlimit ("), "{note}");
    assert!(note.contains(bus_error), "the bus's own words: {note}");
    assert!(note.contains("not writable by uid 1000"), "{note}");
    assert!(note.contains("user@.service"), "the fix: {note}");
    let mem = p.report.memory_bytes.as_ref().unwrap();
    assert_eq!(mem.enforcement, crate::outcome::Enforcement::Rlimit);

    let err = prep_scope(&fs, &fs.host(V2_PROC, PID), BackendChoice::CgroupV2, &scope)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cgroup-v2 limits backend was requested"),
        "{err}"
    );
    assert!(err.contains(bus_error), "{err}");
    assert_eq!(scope.calls(), 2);
}

#[test]
fn scope_without_cpu_controller_falls_back_and_says_which_is_missing() {
    let fs = fake();
    undelegated_v2(&fs);
    let scope = FakeScope::new(&fs, "memory pids", None);
    let p = prep_scope(&fs, &fs.host(V2_PROC, PID), BackendChoice::Auto, &scope).unwrap();
    assert!(p.cgroup.is_none());
    let note = p.report.backend_note.clone().unwrap_or_default();
    assert!(
        note.contains(&format!(
            "in the systemd scope cordon-{PID}-r1.scope: has no cpu controller"
        )),
        "{note}"
    );
    assert!(note.contains("Delegate=memory pids cpu"), "the fix: {note}");
}

#[test]
fn root_and_hybrid_hosts_never_ask_for_a_scope() {
    let fs = fake();
    undelegated_v2(&fs);
    let scope = FakeScope::new(&fs, "cpu memory pids", None);
    let mut host = fs.host(V2_PROC, PID);
    host.uid = 0;
    let _ = prep_scope(&fs, &host, BackendChoice::Auto, &scope);
    assert_eq!(scope.calls(), 0, "root needs no delegation");

    let fs = fake();
    hybrid_tree(&fs);
    fs.deny(&fs.root());
    let scope = FakeScope::new(&fs, "cpu memory pids", None);
    let p = prep_scope(&fs, &fs.host(HYBRID_PROC, PID), BackendChoice::Auto, &scope).unwrap();
    assert_eq!(p.report.backend, "rlimit");
    assert_eq!(
        scope.calls(),
        0,
        "cgroup v2 has no controllers on a hybrid host"
    );

    // Delegated already: no scope either.
    let fs = fake();
    v2_tree(&fs);
    let scope = FakeScope::new(&fs, "cpu memory pids", None);
    let p = prep_scope(&fs, &fs.host(V2_PROC, PID), BackendChoice::Auto, &scope).unwrap();
    assert!(p.cgroup.is_some());
    assert_eq!(scope.calls(), 0);
}

#[test]
fn probe_says_which_path_auto_takes() {
    let fs = fake();
    v2_tree(&fs);
    let scope = FakeScope::new(&fs, "cpu memory pids", None);
    let pr = probe_with_scope(fs.as_ref(), &fs.host(V2_PROC, PID), &scope);
    assert_eq!(
        (pr.auto_backend, pr.auto_path),
        ("cgroup-v2", "own-cgroup-v2")
    );
    assert!(pr.delegation.is_none());

    let fs = fake();
    undelegated_v2(&fs);
    let scope = FakeScope::new(&fs, "cpu memory pids", None);
    let pr = probe_with_scope(fs.as_ref(), &fs.host(V2_PROC, PID), &scope);
    assert_eq!(
        (pr.auto_backend, pr.auto_path),
        ("cgroup-v2", "systemd-scope")
    );
    let d = pr.delegation.clone().unwrap_or_default();
    assert!(
        d.contains("will ask the systemd user manager (version 252"),
        "{d}"
    );
    assert_eq!(scope.calls(), 0, "doctor creates no scope");

    // A manager without cpu: its scopes would lack it, so exec will fall back.
    let scope = FakeScope::new(&fs, "memory pids", None);
    let pr = probe_with_scope(fs.as_ref(), &fs.host(V2_PROC, PID), &scope);
    assert_eq!(
        (pr.auto_backend, pr.auto_path),
        ("rlimit", "rlimit-fallback")
    );
    let d = pr.delegation.clone().unwrap_or_default();
    assert!(
        d.contains("would lack cpu") && d.contains("Delegate=memory pids cpu"),
        "{d}"
    );

    let scope = FakeScope::new(&fs, "cpu memory pids", Some("Failed to connect to bus"));
    let pr = probe_with_scope(fs.as_ref(), &fs.host(V2_PROC, PID), &scope);
    assert_eq!(
        (pr.auto_backend, pr.auto_path),
        ("rlimit", "rlimit-fallback")
    );
    let d = pr.delegation.clone().unwrap_or_default();
    assert!(
        d.contains("Failed to connect to bus") && d.contains("user@.service"),
        "{d}"
    );
}

fn prep_deferred(fs: &Arc<FakeFs>, choice: BackendChoice) -> Result<Prepared, LimitsError> {
    prepare_inner(
        fs.clone(),
        &fs.host(HYBRID_PROC, PID),
        &limits(),
        choice,
        "r1",
        None,
    )
}

#[test]
fn deferred_v1_is_checked_at_once_and_made_by_create_pending() {
    let fs = fake();
    hybrid_tree(&fs);
    let mut p = prep_deferred(&fs, BackendChoice::Auto).unwrap();
    let name = format!("cordon-{PID}-r1");
    let mem = fs.root().join("memory/process_api/e820").join(&name);
    let cpu = fs.root().join("cpu").join(&name);
    let cg = p.cgroup.as_mut().unwrap();
    assert_eq!(cg.backend(), Backend::CgroupV1);
    assert!(cg.is_pending());
    assert!(
        !mem.exists() && !cpu.exists(),
        "nothing is made before create_pending"
    );
    // The report is final already: the swap file exists in cordon's own memory cgroup.
    let note = memory_note(&p);
    assert!(note.contains("memsw"), "{note}");
    let cg = p.cgroup.as_mut().unwrap();
    cg.create_pending().unwrap();
    assert!(!cg.is_pending());
    assert_eq!(
        fs.get(&mem.join("memory.limit_in_bytes")),
        (64u64 << 20).to_string()
    );
    assert_eq!(fs.get(&cpu.join("cpu.cfs_quota_us")), "150000");
    // A second call has nothing to do.
    cg.create_pending().unwrap();
    p.cgroup.take().unwrap().remove().unwrap();
    assert!(!mem.exists() && !cpu.exists());
}

#[test]
fn deferred_v1_that_cannot_be_made_is_an_error_and_leaves_nothing() {
    let fs = fake();
    hybrid_tree(&fs);
    let name = format!("cordon-{PID}-r1");
    // access() says yes (the check passes) but mkdir in the cpu hierarchy fails.
    fs.deny(&fs.root().join("cpu").join(&name));
    let mut p = prep_deferred(&fs, BackendChoice::Auto).unwrap();
    let mut cg = p.cgroup.take().unwrap();
    let err = cg.create_pending().unwrap_err().to_string();
    assert!(
        err.contains("cannot create the sandbox's cgroup v1")
            && err.contains("EACCES")
            && err.contains("--limits-backend rlimit"),
        "{err}"
    );
    assert!(cg.is_pending());
    // No figures from a cgroup that was never made (the result falls back to rusage).
    assert_eq!(cg.metrics(), CgroupMetrics::default());
    let mem = fs.root().join("memory/process_api/e820").join(&name);
    assert!(!mem.exists() && !fs.root().join("pids").join(&name).exists());
    // Removing a cgroup that was never made succeeds and touches nothing.
    cg.remove().unwrap();
}

#[test]
fn deferred_choice_keeps_v1_checks_and_falls_back_like_prepare() {
    let fs = fake();
    hybrid_tree(&fs);
    // cordon's own memory cgroup not writable: the check fails, auto falls back to rlimit
    // with the reason, exactly as the eager path does.
    fs.deny(&fs.root().join("memory/process_api/e820"));
    let p = prep_deferred(&fs, BackendChoice::Auto).unwrap();
    assert!(p.cgroup.is_none());
    let b = p.report.backend_note.clone().unwrap_or_default();
    assert!(b.starts_with("rlimit (") && b.contains("cgroup v1"), "{b}");
    assert!(prep_deferred(&fs, BackendChoice::CgroupV1).is_err());
}

#[test]
fn cpu_pin_takes_whole_cpus_of_those_allowed() {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    let total = (0..nix::sched::CpuSet::count())
        .filter(|&i| allowed.is_set(i).unwrap())
        .count();
    for (c, want) in [(0.5, 1), (1.0, 1), (1.5, 2.min(total)), (1000.0, total)] {
        let pin = cpu_pin(c).unwrap();
        assert_eq!(pin.len(), want, "--cpus {c}: {pin:?}");
        let mut distinct = pin.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), pin.len(), "{pin:?}");
        assert!(pin.iter().all(|&i| allowed.is_set(i).unwrap()), "{pin:?}");
    }
    // The report says how it is held, and when a fraction was rounded up.
    let r = pin_report(0.5, Ok(&[1]));
    assert_eq!(r.enforcement, Enforcement::Affinity);
    let note = r.note.unwrap();
    assert!(
        note.contains("pinned to CPU 1") && note.contains("rounds up"),
        "{note}"
    );
    let r = pin_report(2.0, Err(&nix::Error::EPERM));
    assert_eq!(r.enforcement, Enforcement::NotEnforced);
}

#[test]
fn a_cpu_quota_beyond_the_host_is_noted() {
    let two = std::num::NonZeroUsize::new(2);
    assert_eq!(beyond_the_host(2.0, two), "");
    assert_eq!(beyond_the_host(1.5, two), "");
    assert_eq!(
        beyond_the_host(999.0, two),
        "; more than the 2 CPU(s) available here, so the sandbox gets at most 2"
    );
    assert_eq!(beyond_the_host(999.0, None), "");
}

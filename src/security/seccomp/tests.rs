//! Pure tests: parsing, validation, and the decisions of the compiled default policy, checked
//! with a BPF interpreter (`bpf_eval`); and the equivalence of the one compiled program with
//! the stacked per-action filters it replaced, combined the way the kernel combines filters.

use super::bpf_eval::{Data, errno, run, run_all};
use super::compile::{
    AUDIT_ARCH_X86_64, BPF_JMP_JEQ_K, BPF_LD_W_ABS, assemble, compile_layered, compile_stacked,
    optimize,
};
use super::policy::{self, Action, OpName};
use super::{EntryProblem, SeccompError, builtin_names, compile_builtin, compile_policy_str};

const DEFAULT: &str = include_str!("../../../profiles/seccomp/default.toml");
const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
/// AUDIT_ARCH_I386 = EM_386 (3) | __AUDIT_ARCH_LE, include/uapi/linux/audit.h.
const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;

fn nr(name: &str) -> u32 {
    super::syscalls::number(name).unwrap_or_else(|| panic!("no syscall {name}"))
}

fn decide(name: &str, args: &[u64]) -> u32 {
    let c = compile_builtin("default").expect("default compiles");
    run(&c.program, &Data::x86_64(nr(name), args))
}

fn entry_problem(text: &str) -> (usize, EntryProblem, String) {
    match compile_policy_str(text) {
        Err(e @ SeccompError::InvalidEntry { .. }) => {
            let msg = e.to_string();
            let SeccompError::InvalidEntry { entry, problem, .. } = e else {
                unreachable!()
            };
            (entry, problem, msg)
        }
        other => panic!("expected an InvalidEntry error, got {other:?}"),
    }
}

// ---- the syscall table -------------------------------------------------------------------

#[test]
fn syscall_table_matches_libc_and_has_no_duplicates() {
    for (name, libc_nr) in super::syscalls::LIBC_CHECK {
        assert_eq!(
            i64::from(nr(name)),
            *libc_nr,
            "table disagrees with libc on {name}"
        );
    }
    assert!(super::syscalls::LIBC_CHECK.len() > 350);
    let table = super::syscalls::X86_64;
    for (i, (n, v)) in table.iter().enumerate() {
        assert!(
            table[i + 1..].iter().all(|(m, w)| m != n && w != v),
            "duplicate {n}/{v}"
        );
        assert!(*v < 512, "{n}: x32 numbers do not belong in the table");
    }
    // Newer than libc 0.2.191: from syscall_64.tbl.
    assert_eq!(nr("open_tree_attr"), 467);
    assert_eq!(nr("file_setattr"), 469);
}

// ---- the default policy file -------------------------------------------------------------

#[test]
fn builtin_default_is_listed_compiles_and_is_named_default() {
    assert_eq!(builtin_names(), &["default"]);
    let c = compile_builtin("default").unwrap();
    assert_eq!(c.name, "default");
    assert!(!c.program.is_empty() && c.program.len() < 4096);
}

#[test]
fn unknown_builtin_is_rejected_with_the_list() {
    let e = compile_builtin("strict").unwrap_err();
    assert!(matches!(e, SeccompError::UnknownPolicy { .. }));
    assert!(
        e.to_string().contains("built-in policies are: default"),
        "{e}"
    );
}

#[test]
fn every_default_entry_has_a_real_reason() {
    let file: policy::PolicyFile = toml::from_str(DEFAULT).unwrap();
    assert!(file.deny.len() > 60);
    for e in &file.deny {
        assert!(e.why.trim().len() >= 10, "weak why for {:?}", e.syscall);
    }
}

#[test]
fn default_argument_rules_are_all_32_bit() {
    // Every argument the default policy compares is an int/unsigned int (or clone's lower 32
    // bits); a 64-bit compare would let `value | 1 << 32` through. The one exception is a
    // pointer (prlimit64's new limit), where a 32-bit compare would take an address whose
    // low half is 0 for NULL.
    let file: policy::PolicyFile = toml::from_str(DEFAULT).unwrap();
    let args: Vec<_> = file
        .deny
        .iter()
        .flat_map(|e| {
            e.args
                .iter()
                .map(move |a| (e.syscall.as_slice().join(","), a))
        })
        .collect();
    assert!(args.len() > 10);
    for (name, a) in &args {
        let pointer = name == "prlimit64" && a.index == 2;
        assert_eq!(
            a.width,
            if pointer { 64 } else { 32 },
            "{name} argument {}",
            a.index
        );
    }
}

#[test]
fn one_clone_and_unshare_rule_per_namespace_flag() {
    let p = policy::parse("test", DEFAULT).unwrap();
    let eperm = &p.groups[&Action::Errno(libc::EPERM)];
    let flags = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
        0x80, // CLONE_NEWTIME, not in libc 0.2 for gnu
    ];
    for sys in ["clone", "unshare"] {
        let rules = &eperm[&nr(sys)];
        assert_eq!(rules.len(), flags.len(), "{sys}");
        for flag in flags {
            let flag = flag as u64;
            assert!(
                rules.iter().any(|r| r.len() == 1
                    && r[0].index == 0
                    && !r[0].wide
                    && r[0].op == OpName::MaskedEq
                    && r[0].mask == flag
                    && r[0].value == flag),
                "{sys}: no masked rule for {flag:#x}"
            );
        }
    }
}

// ---- decisions of the compiled default policy --------------------------------------------

#[test]
fn namespace_flags_are_denied_alone_or_mixed_and_plain_clone_is_allowed() {
    let sigchld = libc::SIGCHLD as u64;
    for flag in [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
    ] {
        let f = flag as u64;
        assert_eq!(decide("unshare", &[f]), EPERM);
        assert_eq!(decide("unshare", &[f | libc::CLONE_FILES as u64]), EPERM);
        assert_eq!(decide("clone", &[f | sigchld]), EPERM);
    }
    assert_eq!(decide("unshare", &[0x80]), EPERM, "CLONE_NEWTIME");
    // What glibc's fork and pthread_create pass.
    let fork = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
    assert_eq!(decide("clone", &[fork]), ALLOW);
    let thread = (libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID) as u64;
    assert_eq!(decide("clone", &[thread]), ALLOW);
    assert_eq!(decide("unshare", &[libc::CLONE_FILES as u64]), ALLOW);
}

#[test]
fn clone3_gets_enosys_and_setns_eperm() {
    assert_eq!(decide("clone3", &[0, 88]), errno(libc::ENOSYS));
    assert_eq!(decide("setns", &[3, 0]), EPERM);
}

#[test]
fn unconditional_entries_deny_whatever_the_arguments() {
    for name in [
        "mount",
        "umount2",
        "pivot_root",
        "fsopen",
        "open_tree_attr",
        "ptrace",
        "bpf",
        "io_uring_setup",
        "userfaultfd",
        "keyctl",
        "kexec_load",
        "_sysctl",
        "perf_event_open",
    ] {
        assert_eq!(decide(name, &[]), EPERM, "{name}");
        assert_eq!(decide(name, &[u64::MAX; 6]), EPERM, "{name}");
    }
}

#[test]
fn ordinary_calls_are_allowed() {
    for name in [
        "read",
        "write",
        "openat",
        "mmap",
        "execve",
        "getpid",
        "exit_group",
        "fork",
    ] {
        assert_eq!(decide(name, &[0, 0, 0]), ALLOW, "{name}");
    }
}

#[test]
fn ioctl_compares_only_the_low_32_bits_of_cmd() {
    let tiocsti = libc::TIOCSTI as u64;
    assert_eq!(decide("ioctl", &[0, tiocsti]), EPERM);
    assert_eq!(decide("ioctl", &[0, tiocsti | 1 << 32]), EPERM);
    assert_eq!(
        decide("ioctl", &[0, 0xffff_ffff_0000_0000 | tiocsti]),
        EPERM
    );
    assert_eq!(
        decide("ioctl", &[0, libc::TIOCLINUX as u64 | 1 << 40]),
        EPERM
    );
    assert_eq!(decide("ioctl", &[0, libc::TCGETS as u64]), ALLOW);
    assert_eq!(decide("ioctl", &[0, libc::FIONREAD as u64]), ALLOW);

    // And structurally: the ioctl-only policy never loads the high half of arg 1 (offset 28),
    // and does compare the low half (offset 24) with TIOCSTI.
    let c = compile_policy_str(
        r#"name = "t"
           [[deny]]
           syscall = "ioctl"
           why = "terminal injection"
           args = [{ index = 1, width = 32, op = "eq", value = 0x5412 }]"#,
    )
    .unwrap();
    let prog = &c.program;
    assert!(
        !prog.iter().any(|i| i.code == BPF_LD_W_ABS && i.k == 28),
        "high half loaded"
    );
    assert!(prog.windows(2).any(|w| w[0].code == BPF_LD_W_ABS
        && w[0].k == 24
        && w[1].code == BPF_JMP_JEQ_K
        && w[1].k == 0x5412));
}

#[test]
fn personality_allows_only_linux_and_query() {
    assert_eq!(decide("personality", &[0]), ALLOW);
    assert_eq!(decide("personality", &[0xffff_ffff]), ALLOW);
    assert_eq!(
        decide("personality", &[0x0040_0000]),
        EPERM,
        "READ_IMPLIES_EXEC"
    );
    assert_eq!(
        decide("personality", &[0x0004_0000]),
        EPERM,
        "ADDR_NO_RANDOMIZE"
    );
    // The kernel reads an unsigned int: high bits do not change the verdict.
    assert_eq!(decide("personality", &[1 << 32]), ALLOW);
    assert_eq!(decide("personality", &[1 << 32 | 0x0040_0000]), EPERM);
}

#[test]
fn dangerous_socket_families_are_denied_ordinary_ones_allowed() {
    for (fam, name) in [
        (libc::AF_NETLINK, "netlink"),
        (libc::AF_PACKET, "packet"),
        (libc::AF_VSOCK, "vsock"),
        (libc::AF_KEY, "key"),
        (libc::AF_ALG, "alg"),
    ] {
        let f = fam as u64;
        assert_eq!(decide("socket", &[f, 3, 0]), EPERM, "{name}");
        assert_eq!(
            decide("socket", &[f | 1 << 32, 3, 0]),
            EPERM,
            "{name} high bits"
        );
        assert_eq!(decide("socketpair", &[f, 1, 0]), EPERM, "{name}");
    }
    for fam in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
        assert_eq!(decide("socket", &[fam as u64, 1, 0]), ALLOW);
    }
}

#[test]
fn only_unix_and_inet_families_and_their_ordinary_protocols_are_allowed() {
    // The obsolete type (libc deprecates its name) the kernel turns into AF_PACKET.
    const SOCK_PACKET: libc::c_int = 10;
    for (d, t, p) in [
        (libc::AF_UNIX, libc::SOCK_STREAM, 0),
        (libc::AF_UNIX, libc::SOCK_SEQPACKET, 0),
        (libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0),
        (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP),
        (
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK,
            libc::IPPROTO_UDP,
        ),
        (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
        (libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_TCP),
        (libc::AF_INET6, libc::SOCK_DGRAM, libc::IPPROTO_ICMPV6),
    ] {
        assert_eq!(
            decide("socket", &[d as u64, t as u64, p as u64]),
            ALLOW,
            "socket({d}, {t:#x}, {p})"
        );
    }
    for (d, t, p) in [
        (libc::AF_CAN, libc::SOCK_RAW, 1),
        (libc::AF_X25, libc::SOCK_SEQPACKET, 0),
        (libc::AF_XDP, libc::SOCK_RAW, 0),
        (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_MPTCP),
        (libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_MPTCP),
        (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDPLITE),
        (libc::AF_INET6, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
        (libc::AF_INET, libc::SOCK_SEQPACKET, 0),
        (libc::AF_INET6, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0),
        (libc::AF_INET, SOCK_PACKET, 0),
        (libc::AF_INET, SOCK_PACKET | libc::SOCK_CLOEXEC, 0x0300),
    ] {
        assert_eq!(
            decide("socket", &[d as u64, t as u64, p as u64]),
            EPERM,
            "socket({d}, {t:#x}, {p})"
        );
    }
    // The family compare is 32-bit: high bits do not hide AF_CAN, nor make AF_INET refused.
    assert_eq!(decide("socket", &[29 | 1 << 32, 3, 1]), EPERM);
    assert_eq!(decide("socket", &[2 | 1 << 32, 1, 0]), ALLOW);
    assert_eq!(decide("socketpair", &[libc::AF_CAN as u64, 3, 1, 0]), EPERM);
}

#[test]
fn upper_layer_protocols_and_page_cache_residency_are_refused() {
    let sockopt = |level: u64, name: u64| decide("setsockopt", &[3, level, name, 0, 4]);
    assert_eq!(sockopt(6, 31), errno(libc::ENOPROTOOPT), "TCP_ULP");
    // The compares are 32-bit: high bits hide neither the level nor the option.
    assert_eq!(
        sockopt(6 | 1 << 32, 31 | 1 << 40),
        errno(libc::ENOPROTOOPT),
        "TCP_ULP, high bits"
    );
    assert_eq!(sockopt(6, 1), ALLOW, "TCP_NODELAY");
    assert_eq!(sockopt(1, 31), ALLOW, "option 31 at SOL_SOCKET");
    assert_eq!(decide("cachestat", &[3, 0, 0, 0]), errno(libc::ENOSYS));
}

#[test]
fn inotify_line_disciplines_and_other_processes_limits_are_refused() {
    for name in ["inotify_init", "inotify_init1", "memfd_secret"] {
        assert_eq!(decide(name, &[0]), errno(libc::ENOSYS), "{name}");
    }
    let ioctl = |cmd: u64| decide("ioctl", &[0, cmd, 0]);
    assert_eq!(ioctl(0x5423), EPERM, "TIOCSETD");
    assert_eq!(ioctl(0x5423 | 1 << 32), EPERM, "TIOCSETD, upper half set");
    assert_eq!(ioctl(0x5424), ALLOW, "TIOCGETD");
    // prlimit64(pid, resource, new, old)
    let prlimit = |pid: u64, new: u64| decide("prlimit64", &[pid, 7, new, 0]);
    assert_eq!(prlimit(0, 0x7f00_0000_0000), ALLOW, "setting its own");
    assert_eq!(prlimit(1, 0), ALLOW, "reading init's");
    assert_eq!(prlimit(1, 0x7f00_0000_0000), EPERM, "setting init's");
    assert_eq!(
        prlimit(1, 0x7f00_0000_0000 & !0xffff_ffff),
        EPERM,
        "a new limit at an address whose low half is 0"
    );
    assert_eq!(decide("setrlimit", &[7, 0x7f00_0000_0000]), ALLOW);
}

#[test]
fn tcp_fast_open_sends_are_refused_other_sends_allowed() {
    const EOPNOTSUPP: u32 = libc::SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32;
    for (name, at) in [("sendto", 3), ("sendmmsg", 3), ("sendmsg", 2)] {
        let send = |flags: u64| {
            let mut args = [3u64, 0x7f00_0000_0000, 10, 0, 0, 0];
            args[at] = flags;
            decide(name, &args)
        };
        assert_eq!(send(0x2000_0000), EOPNOTSUPP, "{name} MSG_FASTOPEN");
        assert_eq!(
            send(0x2000_4040),
            EOPNOTSUPP,
            "{name} MSG_FASTOPEN among other flags"
        );
        assert_eq!(send(0x4040), ALLOW, "{name} MSG_DONTWAIT|MSG_NOSIGNAL");
        assert_eq!(send(0), ALLOW, "{name} no flags");
    }
}

#[test]
fn foreign_architectures_and_x32_numbers_are_killed() {
    let c = compile_builtin("default").unwrap();
    // i386 getpid (20) through int 0x80.
    let i386 = Data {
        nr: 20,
        arch: AUDIT_ARCH_I386,
        args: [0; 6],
    };
    assert_eq!(run(&c.program, &i386), KILL);
    // x32 getpid, and the x32 ioctl (0x40000000 | 514) that a native-number rule would miss.
    for x in [0x4000_0000 | 39, 0x4000_0000 | 514, 0x7fff_ffff] {
        let d = Data::x86_64(x, &[0, libc::TIOCSTI as u64]);
        assert_eq!(run(&c.program, &d), KILL, "{x:#x}");
    }
    // syscall(-1) is not an x32 call: the kernel answers ENOSYS; the guard lets it through.
    let minus_one = Data {
        nr: -1,
        arch: AUDIT_ARCH_X86_64,
        args: [0; 6],
    };
    assert_eq!(run(&c.program, &minus_one), ALLOW);
}

#[test]
fn kernel_precedence_kill_beats_errno_beats_allow_regardless_of_order() {
    // The interpreter's combination rule, on the stacked reference filters reversed: same
    // answers (the reasoning that lets one program replace them, see compile.rs).
    let p = policy::parse("test", DEFAULT).unwrap();
    let mut filters = compile_stacked(&p);
    filters.reverse();
    let d = Data::x86_64(nr("ioctl"), &[0, libc::TIOCSTI as u64]);
    assert_eq!(run_all(&filters, &d), EPERM);
    let x32 = Data::x86_64(0x4000_0000 | 16, &[0, libc::TIOCSTI as u64]);
    assert_eq!(run_all(&filters, &x32), KILL);
}

/// Argument vectors around every rule of `p` for syscall `nr`: zeros, all ones, and for each
/// condition its value, its value with the high half set, and its value off by one.
fn probe_args(p: &policy::Policy, nr: u32) -> Vec<[u64; 6]> {
    let mut out = vec![[0; 6], [u64::MAX; 6]];
    for group in p.groups.values() {
        for conds in group.get(&nr).into_iter().flatten() {
            let mut all = [0u64; 6];
            for c in conds {
                all[usize::from(c.index)] = c.value;
                for v in [
                    c.value,
                    c.value | 1 << 32,
                    c.value.wrapping_add(1),
                    c.value.wrapping_sub(1),
                    c.value | !c.mask,
                ] {
                    let mut a = [0u64; 6];
                    a[usize::from(c.index)] = v;
                    out.push(a);
                }
            }
            out.push(all);
        }
    }
    out
}

fn assert_same_decisions(text: &str) {
    let p = policy::parse("test", text).unwrap();
    let one = super::compile::compile(&p).unwrap();
    assert_decides_like(&one, &compile_stacked(&p), &[&p]);
}

/// `one` answers like the filters of `stack` installed in that order (the kernel's precedence
/// across filters), for both architectures, every syscall number the table has and a few
/// beyond it, and argument values around every rule of `policies`.
fn assert_decides_like(
    one: &[seccompiler::sock_filter],
    stack: &[seccompiler::BpfProgram],
    policies: &[&policy::Policy],
) {
    let mut checked = 0;
    for arch in [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386] {
        let nrs = (0..=520u32).chain([
            0x4000_0000 | 16,
            0x4000_0000 | 514,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX,
        ]);
        for n in nrs {
            for args in policies.iter().flat_map(|p| probe_args(p, n)) {
                let d = Data {
                    nr: n as i32,
                    arch,
                    args,
                };
                assert_eq!(
                    run(one, &d),
                    run_all(stack, &d),
                    "nr {n:#x} arch {arch:#x} args {args:x?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 2000);
}

#[test]
fn single_program_decides_like_the_stacked_filters() {
    assert_same_decisions(DEFAULT);
    assert_same_decisions(
        "name = \"t\"\n\
         [[deny]]\nsyscall = \"mount\"\nwhy = \"x\"\naction = \"kill_process\"\n\
         [[deny]]\nsyscall = \"ptrace\"\nwhy = \"x\"\naction = \"trap\"\n\
         [[deny]]\nsyscall = \"acct\"\nwhy = \"x\"\naction = \"log\"\n\
         [[deny]]\nsyscall = \"clone3\"\nwhy = \"x\"\nerrno = \"ENOSYS\"\n\
         [[deny]]\nsyscall = \"socket\"\nwhy = \"x\"\naction = \"trap\"\n\
         args = [{ index = 0, width = 64, op = \"gt\", value = 0x1_0000_0000 }]\n\
         [[deny]]\nsyscall = \"bpf\"\nwhy = \"x\"\n",
    );
    assert_same_decisions("name = \"empty\"\n");
}

#[test]
fn builtin_program_is_the_runtime_compile_of_its_file() {
    // The build script and the library compile the same file with the same code; the
    // embedded bytes must decode to exactly what a compile at run time gives.
    // Each built-in policy, alone and with each combination of the two layers.
    assert_eq!(super::EMBEDDED.len(), 6 * builtin_names().len());
    for (name, _) in super::EMBEDDED {
        let policy = name.split('+').next().unwrap_or_default();
        assert!(builtin_names().contains(&policy), "{name}");
    }
    let embedded = compile_builtin("default").unwrap();
    let runtime = compile_policy_str(DEFAULT).unwrap();
    assert_eq!(embedded.name, runtime.name);
    assert_same_program(&embedded.program, &runtime.program, "default");
    // The layered programs too (the watch's notifications keep it from compile_policy_str).
    for (watch, no_tcp, pin, name) in [
        (true, false, false, "default+memory-watch"),
        (false, false, true, "default+cpu-pin"),
        (true, false, true, "default+memory-watch+cpu-pin"),
        (true, true, false, "default+memory-watch+no-tcp"),
        (true, true, true, "default+memory-watch+no-tcp+cpu-pin"),
    ] {
        let layers = super::Layers {
            memory_watch: watch,
            no_tcp,
            cpu_pin: pin,
        };
        let embedded = super::compile_builtin_with("default", layers).unwrap();
        assert_eq!(embedded.name, name);
        let mut layers = vec![parse_file("default")];
        layers.extend(watch.then(|| parse_file("memory-watch")));
        layers.extend(no_tcp.then(|| parse_file("no-tcp")));
        layers.extend(pin.then(|| parse_file("cpu-pin")));
        let runtime = compile_layered(&layers.iter().collect::<Vec<_>>()).unwrap();
        assert_same_program(&embedded.program, &runtime, name);
    }
    assert!(matches!(
        super::compile_builtin_layered("nope", true, false),
        Err(SeccompError::UnknownPolicy { .. })
    ));
}

/// A policy file of profiles/seccomp, parsed.
fn parse_file(name: &str) -> policy::Policy {
    let text = match name {
        "default" => DEFAULT,
        "memory-watch" => include_str!("../../../profiles/seccomp/memory-watch.toml"),
        "cpu-pin" => include_str!("../../../profiles/seccomp/cpu-pin.toml"),
        "no-tcp" => include_str!("../../../profiles/seccomp/no-tcp.toml"),
        other => panic!("no policy file {other}"),
    };
    policy::parse(name, text).unwrap()
}

/// `layers` (newest first) compiled into one program decide every call as their own programs
/// installed oldest first would (the kernel's precedence across filters).
fn assert_layered_decides_like_the_stack(layers: &[policy::Policy]) {
    let refs: Vec<&policy::Policy> = layers.iter().collect();
    let one = compile_layered(&refs).unwrap();
    let stack: Vec<_> = layers
        .iter()
        .rev()
        .map(|p| super::compile::compile(p).unwrap())
        .collect();
    assert_decides_like(&one, &stack, &refs);
}

#[test]
fn layered_programs_decide_like_the_stacked_filters() {
    let (default, watch, pin) = (
        parse_file("default"),
        parse_file("memory-watch"),
        parse_file("cpu-pin"),
    );
    assert_layered_decides_like_the_stack(&[default.clone(), watch.clone()]);
    assert_layered_decides_like_the_stack(&[default.clone(), pin.clone()]);
    assert_layered_decides_like_the_stack(&[default, watch, pin]);
    // Argument rules on the same syscall in both layers: the newer layer's unmatched rules
    // fall through to the older layer's, whose match answers; a bare entry answers alone.
    let newer = policy::parse(
        "newer",
        "name = \"newer\"\n\
         [[deny]]\nsyscall = \"socket\"\nwhy = \"x\"\nerrno = \"EACCES\"\n\
         args = [{ index = 0, width = 32, op = \"eq\", value = 16 }]\n\
         [[deny]]\nsyscall = \"mmap\"\nwhy = \"x\"\naction = \"kill_process\"\n\
         args = [{ index = 2, width = 32, op = \"masked_eq\", mask = 4, value = 4 }]\n\
         [[deny]]\nsyscall = \"acct\"\nwhy = \"x\"\n",
    )
    .unwrap();
    let older = policy::parse(
        "older",
        "name = \"older\"\n\
         [[deny]]\nsyscall = \"socket\"\nwhy = \"x\"\nerrno = \"EPERM\"\n\
         args = [{ index = 0, width = 32, op = \"eq\", value = 17 }]\n\
         [[deny]]\nsyscall = \"mmap\"\nwhy = \"x\"\naction = \"trap\"\n\
         args = [{ index = 3, width = 32, op = \"masked_eq\", mask = 1, value = 1 }]\n\
         [[deny]]\nsyscall = \"acct\"\nwhy = \"x\"\naction = \"log\"\n\
         [[deny]]\nsyscall = \"bpf\"\nwhy = \"x\"\naction = \"trap\"\n",
    )
    .unwrap();
    assert_layered_decides_like_the_stack(&[newer.clone(), older.clone()]);
    let one = compile_layered(&[&newer, &older]).unwrap();
    let d = |n: &str, a: &[u64]| run(&one, &Data::x86_64(nr(n), a));
    assert_eq!(d("socket", &[16, 2]), errno(libc::EACCES));
    assert_eq!(d("socket", &[17, 2]), errno(libc::EPERM));
    assert_eq!(d("socket", &[2, 1]), ALLOW);
    assert_eq!(d("mmap", &[0, 4096, 4, 1]), libc::SECCOMP_RET_KILL_PROCESS);
    assert_eq!(d("mmap", &[0, 4096, 3, 1]), libc::SECCOMP_RET_TRAP);
    assert_eq!(d("mmap", &[0, 4096, 3, 2]), ALLOW);
    assert_eq!(d("acct", &[0]), errno(libc::EPERM));
    assert_eq!(d("bpf", &[0]), libc::SECCOMP_RET_TRAP);
}

#[test]
fn layers_where_an_older_action_outranks_a_newer_one_are_refused() {
    // The stack would answer kill_process (the older layer's) where the newer one's errno
    // matched first: one program cannot decide that as the stack does.
    let newer = policy::parse(
        "newer",
        "name = \"newer\"\n[[deny]]\nsyscall = \"bpf\"\nwhy = \"x\"\n",
    )
    .unwrap();
    let older = policy::parse(
        "older",
        "name = \"older\"\n[[deny]]\nsyscall = \"bpf\"\nwhy = \"x\"\naction = \"kill_process\"\n",
    )
    .unwrap();
    match compile_layered(&[&newer, &older]) {
        Err(e @ SeccompError::LayerOrder { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("newer+older") && m.contains("kill_process"),
                "{m}"
            );
        }
        other => panic!("expected LayerOrder, got {other:?}"),
    }
    // The other way round is the stack's answer whichever matches.
    assert!(compile_layered(&[&older, &newer]).is_ok());
}

#[test]
fn the_no_tcp_layer_refuses_tcp_sockets_only() {
    let layers = |no_tcp| super::Layers {
        memory_watch: true,
        no_tcp,
        cpu_pin: false,
    };
    let with = super::compile_builtin_with("default", layers(true)).expect("no-tcp");
    let without = super::compile_builtin_with("default", layers(false)).expect("watch");
    let socket = super::syscall_number("socket").unwrap();
    let (stream, dgram) = (libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64);
    let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
    for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
        for ty in [stream, stream | flags] {
            let call = Data::x86_64(socket, &[family, ty, 0]);
            assert_eq!(
                run(&with.program, &call),
                errno(libc::EACCES),
                "{family} {ty:#x}"
            );
            assert_eq!(run(&without.program, &call), ALLOW, "{family} {ty:#x}");
        }
        let udp = Data::x86_64(socket, &[family, dgram | flags, 0]);
        assert_eq!(run(&with.program, &udp), ALLOW, "{family} UDP");
    }
    let unix = Data::x86_64(socket, &[libc::AF_UNIX as u64, stream, 0]);
    assert_eq!(run(&with.program, &unix), ALLOW);
    // Never alone: it only closes a gap of the memory watch.
    assert!(matches!(
        super::compile_builtin_with(
            "default",
            super::Layers {
                memory_watch: false,
                no_tcp: true,
                cpu_pin: false
            }
        ),
        Err(SeccompError::UnknownPolicy { .. })
    ));
}

#[test]
fn the_cpu_pin_filter_denies_changing_the_affinity_only() {
    let both = super::compile_builtin_layered("default", false, true).expect("default+cpu-pin");
    assert!(
        !builtin_names().contains(&"cpu-pin"),
        "not a policy to run under alone"
    );
    let default = compile_builtin("default").expect("default");
    let nr = |name| super::syscall_number(name).expect(name);
    assert_eq!(
        run(
            &both.program,
            &Data::x86_64(nr("sched_setaffinity"), &[0, 8])
        ),
        errno(libc::EPERM)
    );
    assert_eq!(
        run(
            &default.program,
            &Data::x86_64(nr("sched_setaffinity"), &[0, 8])
        ),
        ALLOW
    );
    // io_uring's kernel threads follow the cpuset, not the affinity: denied by the pin's
    // layer on its own too.
    let pin = super::compile::compile(&parse_file("cpu-pin")).unwrap();
    for name in ["io_uring_setup", "io_uring_register"] {
        assert_eq!(
            run(&pin, &Data::x86_64(nr(name), &[0, 0])),
            errno(libc::EPERM),
            "{name}"
        );
    }
    for name in ["sched_getaffinity", "sched_yield", "read", "clone"] {
        assert_eq!(
            run(&both.program, &Data::x86_64(nr(name), &[0, 0])),
            ALLOW,
            "{name}"
        );
    }
}

fn assert_same_program(a: &[seccompiler::sock_filter], b: &[seccompiler::sock_filter], name: &str) {
    assert_eq!(a.len(), b.len(), "{name}: program length");
    for (i, (a, b)) in a.iter().zip(b).enumerate() {
        assert_eq!(
            (a.code, a.jt, a.jf, a.k),
            (b.code, b.jt, b.jf, b.k),
            "{name}: instruction {i}"
        );
    }
}

#[test]
fn dispatch_path_is_short_for_every_syscall() {
    // The kernel emulates the program for every syscall number when it is installed (its
    // constant-ALLOW cache), under a lock; a binary search keeps each path short.
    // The path of a syscall the policy does not name: guard, search, `ret ALLOW`.
    let c = compile_builtin("default").unwrap();
    let p = policy::parse("test", DEFAULT).unwrap();
    let named = |n: u32| p.groups.values().any(|g| g.contains_key(&n));
    let longest = (0..470)
        .filter(|n| !named(*n))
        .map(|n| super::bpf_eval::steps(&c.program, &Data::x86_64(n, &[])))
        .max()
        .unwrap();
    assert!(longest <= 24, "longest path: {longest} instructions");
}

// ---- validation errors name the entry ----------------------------------------------------

#[test]
fn entry_without_why_is_rejected_naming_it() {
    let e = compile_policy_str("name = \"t\"\n[[deny]]\nsyscall = \"mount\"\n").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SeccompError::Parse { .. }), "{e:?}");
    assert!(msg.contains("missing field `why`"), "{msg}");
    assert!(msg.contains("line 2"), "the entry's line is named: {msg}");
    assert!(msg.contains("profiles/seccomp/README.md"), "{msg}");
}

#[test]
fn empty_why_is_rejected_naming_the_entry() {
    let (entry, problem, msg) = entry_problem(
        "name = \"t\"\n[[deny]]\nsyscall = \"ptrace\"\nwhy = \"ok reason\"\n\
         [[deny]]\nsyscall = \"mount\"\nwhy = \"  \"\n",
    );
    assert_eq!((entry, problem), (2, EntryProblem::EmptyWhy));
    assert!(msg.contains("entry #2 (syscall mount)"), "{msg}");
}

#[test]
fn unknown_syscall_is_rejected_naming_it_and_the_entry() {
    let (entry, problem, msg) =
        entry_problem("name = \"t\"\n[[deny]]\nsyscall = [\"mount\", \"umount\"]\nwhy = \"x\"\n");
    assert_eq!(entry, 1);
    assert_eq!(problem, EntryProblem::UnknownSyscall("umount".into()));
    assert!(
        msg.contains("`umount` is not an x86_64 system call"),
        "{msg}"
    );
}

#[test]
fn unknown_keys_are_rejected_at_every_level() {
    for (text, key) in [
        ("name = \"t\"\nflavour = 1\n", "flavour"),
        (
            "name = \"t\"\n[[deny]]\nsyscall = \"mount\"\nwhy = \"x\"\ncomment = \"y\"\n",
            "comment",
        ),
        (
            "name = \"t\"\n[[deny]]\nsyscall = \"ioctl\"\nwhy = \"x\"\n\
             args = [{ index = 1, width = 32, op = \"eq\", value = 1, size = 4 }]\n",
            "size",
        ),
    ] {
        let e = compile_policy_str(text).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, SeccompError::Parse { .. }), "{key}: {e:?}");
        assert!(msg.contains(&format!("unknown field `{key}`")), "{msg}");
    }
}

#[test]
fn bad_actions_errnos_and_args_are_rejected() {
    let base = "name = \"t\"\n[[deny]]\nsyscall = \"ioctl\"\nwhy = \"x\"\n";
    let cases: &[(&str, EntryProblem)] = &[
        (
            "errno = \"EWHATEVER\"",
            EntryProblem::UnknownErrno("EWHATEVER".into()),
        ),
        (
            "action = \"trap\"\nerrno = \"EPERM\"",
            EntryProblem::ErrnoWithoutErrnoAction,
        ),
        (
            "args = [{ index = 6, width = 32, op = \"eq\", value = 1 }]",
            EntryProblem::ArgIndex(6),
        ),
        (
            "args = [{ index = 1, width = 16, op = \"eq\", value = 1 }]",
            EntryProblem::ArgWidth(16),
        ),
        (
            "args = [{ index = 1, width = 32, op = \"masked_eq\", value = 1 }]",
            EntryProblem::MaskRequired,
        ),
        (
            "args = [{ index = 1, width = 32, op = \"eq\", value = 1, mask = 1 }]",
            EntryProblem::MaskNotAllowed,
        ),
        (
            "args = [{ index = 1, width = 32, op = \"eq\", value = 0x100000000 }]",
            EntryProblem::TooWide {
                what: "value",
                value: 1 << 32,
            },
        ),
        (
            "args = [{ index = 1, width = 32, op = \"masked_eq\", mask = 1, value = 3 }]",
            EntryProblem::ValueOutsideMask { value: 3, mask: 1 },
        ),
        ("syscall = []", EntryProblem::NoSyscall),
    ];
    for (extra, want) in cases {
        // `syscall = []` replaces the base's syscall line rather than adding a second one.
        let text = if extra.starts_with("syscall") {
            base.replace("syscall = \"ioctl\"", extra)
        } else {
            format!("{base}{extra}\n")
        };
        let (entry, problem, _) = entry_problem(&text);
        assert_eq!((entry, &problem), (1, want), "{extra}");
    }
}

#[test]
fn conflicting_or_redundant_entries_are_rejected() {
    let (entry, problem, _) = entry_problem(
        "name = \"t\"\n[[deny]]\nsyscall = \"mount\"\nwhy = \"x\"\n\
         [[deny]]\nsyscall = \"mount\"\nwhy = \"y\"\nerrno = \"ENOSYS\"\n",
    );
    assert_eq!(entry, 2);
    assert_eq!(
        problem,
        EntryProblem::ConflictingAction {
            syscall: "mount".into(),
            other_entry: 1
        }
    );
    let (_, problem, _) = entry_problem(
        "name = \"t\"\n[[deny]]\nsyscall = \"ioctl\"\nwhy = \"x\"\n\
         [[deny]]\nsyscall = \"ioctl\"\nwhy = \"y\"\n\
         args = [{ index = 1, width = 32, op = \"eq\", value = 1 }]\n",
    );
    assert!(matches!(problem, EntryProblem::Redundant { .. }));
    let (_, problem, _) =
        entry_problem("name = \"t\"\n[[deny]]\nsyscall = [\"ioctl\", \"ioctl\"]\nwhy = \"x\"\n");
    assert_eq!(problem, EntryProblem::DuplicateSyscall("ioctl".into()));
}

#[test]
fn bad_policy_names_and_broken_toml_are_rejected() {
    assert!(matches!(
        compile_policy_str("name = \"a b\"\n").unwrap_err(),
        SeccompError::InvalidName { .. }
    ));
    assert!(matches!(
        compile_policy_str("name = \"t\"\n[[deny]\n").unwrap_err(),
        SeccompError::Parse { .. }
    ));
    assert!(matches!(
        compile_policy_str("description = \"no name\"\n").unwrap_err(),
        SeccompError::Parse { .. }
    ));
}

#[test]
fn every_action_compiles_into_the_one_program() {
    let c = compile_policy_str(
        "name = \"t\"\n\
         [[deny]]\nsyscall = \"mount\"\nwhy = \"x\"\naction = \"kill_process\"\n\
         [[deny]]\nsyscall = \"ptrace\"\nwhy = \"x\"\naction = \"trap\"\n\
         [[deny]]\nsyscall = \"acct\"\nwhy = \"x\"\naction = \"log\"\n\
         [[deny]]\nsyscall = \"bpf\"\nwhy = \"x\"\n",
    )
    .unwrap();
    let at = |name: &str| run(&c.program, &Data::x86_64(nr(name), &[]));
    assert_eq!(at("mount"), KILL);
    assert_eq!(at("ptrace"), libc::SECCOMP_RET_TRAP);
    assert_eq!(at("acct"), libc::SECCOMP_RET_LOG);
    assert_eq!(at("bpf"), EPERM);
    assert_eq!(at("read"), ALLOW);
    // An empty policy still installs the architecture guard.
    let empty = compile_policy_str("name = \"empty\"\n").unwrap().program;
    assert_eq!(run(&empty, &Data::x86_64(0x4000_0000 | 39, &[])), KILL);
    assert_eq!(run(&empty, &Data::x86_64(nr("mount"), &[])), ALLOW);
}

#[test]
fn install_refuses_an_empty_compiled_policy() {
    let c = super::Compiled {
        name: "none".into(),
        program: vec![],
    };
    assert!(matches!(
        super::install(&c),
        Err(SeccompError::NothingToInstall)
    ));
}

#[test]
fn the_memory_watch_layer_on_default_denies_memfds_and_shows_shared_anonymous_mappings() {
    let layered =
        super::compile_builtin_layered("default", true, false).expect("default+memory-watch");
    assert_eq!(layered.name, "default+memory-watch");
    assert!(
        !builtin_names().contains(&"memory-watch"),
        "not a policy to run under alone"
    );
    let default = compile_builtin("default").expect("default");
    // The one program the payload installs (run_all of one program is that program's answer).
    let both = [layered.program.clone()];
    let nr = |name| super::syscall_number(name).expect(name);
    let notif = libc::SECCOMP_RET_USER_NOTIF;
    for name in ["memfd_create", "vmsplice", "tee"] {
        assert_eq!(
            run_all(&both, &Data::x86_64(nr(name), &[0, 0])),
            errno(libc::ENOSYS),
            "{name}"
        );
        assert_eq!(
            run(&default.program, &Data::x86_64(nr(name), &[0, 0])),
            ALLOW,
            "{name}"
        );
    }
    // mmap goes to the supervisor first exactly when MAP_SHARED (0x1) and MAP_ANONYMOUS (0x20)
    // are both in its flags (argument 3), MAP_SHARED_VALIDATE (0x3) included, whatever else
    // is set; private and file mappings run at full speed.
    let mmap = |flags: u64| {
        run_all(
            &both,
            &Data::x86_64(nr("mmap"), &[0, 4096, 3, flags, u64::MAX, 0]),
        )
    };
    // (MAP_HUGETLB, 0x40000, is refused by the default policy whatever the rest.)
    for flags in [0x21, 0x23, 0x31, 0x100000 | 0x21, 0xffff_ffff & !0x40000] {
        assert_eq!(mmap(flags), notif, "mmap flags {flags:#x}");
    }
    for flags in [0x01, 0x03, 0x02, 0x22, 0x20, 0x11, 0xffff_ffde & !0x40000] {
        assert_eq!(mmap(flags), ALLOW, "mmap flags {flags:#x}");
    }
    for flags in [0x40000 | 0x21, 0x40000 | 0x22, 0xffff_ffff] {
        assert_eq!(mmap(flags), errno(libc::EPERM), "mmap flags {flags:#x}");
    }
    // Nothing else waits: calls that cut, move or drop mappings run at full speed.
    for name in [
        "munmap",
        "mremap",
        "brk",
        "madvise",
        "mprotect",
        "shmat",
        "shmdt",
        "remap_file_pages",
        "openat",
        "sendmsg",
        "exit_group",
    ] {
        assert_eq!(
            run_all(
                &both,
                &Data::x86_64(nr(name), &[0x7f00_0000_0000, 4096, 0x4000])
            ),
            ALLOW,
            "{name}"
        );
    }
    // The policy's own denials stand (ERRNO outranks USER_NOTIF in the kernel's precedence).
    assert_eq!(
        run_all(&both, &Data::x86_64(nr("clone3"), &[0, 88])),
        errno(libc::ENOSYS)
    );
    // Sockets: only those the watch's sock_diag dumps list (unix; TCP and UDP over IPv4 and
    // IPv6), whatever flags ride on the type; the upper half of an int argument is ignored.
    let socket = |domain: u64, ty: u64, proto: u64| {
        run_all(&both, &Data::x86_64(nr("socket"), &[domain, ty, proto]))
    };
    let (unix, inet, inet6) = (1, 2, 10);
    let flags = 0x800 | 0x80000; // SOCK_NONBLOCK | SOCK_CLOEXEC
    for (d, t, p) in [
        (unix, 1, 0),
        (unix, 2 | flags, 0),
        (unix, 5, 0),
        (inet, 1, 0),
        (inet, 1 | flags, 6),
        (inet, 2, 17),
        (inet6, 1, 6),
        (inet6, 2 | flags, 0),
        (inet | 1 << 32, 1, 0),
    ] {
        assert_eq!(socket(d, t, p), ALLOW, "socket({d}, {t:#x}, {p})");
    }
    let refused = errno(libc::EAFNOSUPPORT);
    for (d, t, p) in [
        (inet, 5, 0), // SOCK_SEQPACKET: SCTP when loaded
        (inet6, 5 | flags, 0),
        (inet, 6, 0),    // SOCK_DCCP
        (inet, 3, 1),    // raw ICMP
        (inet, 1, 132),  // IPPROTO_SCTP
        (inet6, 1, 262), // IPPROTO_MPTCP
        (inet, 2, 136),  // IPPROTO_UDPLITE
        (inet, 2, 1),    // ICMP "ping" sockets
        (9, 5, 0),       // AF_X25
        (44, 3, 0),      // AF_XDP
        (3, 2, 0),       // AF_AX25
    ] {
        // The default policy (installed last, so first to decide among equal actions)
        // refuses most of these itself, with EPERM; the rest are the watch's.
        let by_default = run(
            &default.program,
            &Data::x86_64(nr("socket"), &[d, t, p, 0, 0, 0]),
        );
        let want = if by_default == ALLOW {
            refused
        } else {
            by_default
        };
        assert_ne!(want, ALLOW);
        assert_eq!(socket(d, t, p), want, "socket({d}, {t:#x}, {p})");
    }
    let pair = |domain: u64| run_all(&both, &Data::x86_64(nr("socketpair"), &[domain, 1, 0, 0]));
    assert_eq!(pair(unix), ALLOW);
    assert_eq!(pair(inet), refused);
    // A pipe keeps its default 16 pages, which the watch counts it at.
    let fcntl = |cmd: u64| run_all(&both, &Data::x86_64(nr("fcntl"), &[3, cmd, 1 << 20]));
    assert_eq!(fcntl(1031), errno(libc::EPERM), "F_SETPIPE_SZ");
    assert_eq!(
        fcntl(1031 | 1 << 32),
        errno(libc::EPERM),
        "F_SETPIPE_SZ, upper half set"
    );
    for cmd in [1032, 1, 2, 3, 4, 1030] {
        assert_eq!(fcntl(cmd), ALLOW, "fcntl cmd {cmd}");
    }
    for name in ["splice", "sendfile"] {
        assert_eq!(
            run_all(&both, &Data::x86_64(nr(name), &[0, 0])),
            errno(libc::EINVAL),
            "{name}"
        );
    }
    // Zero-copy sends pin pages no socket buffer counts.
    let sockopt = |level: u64, name: u64| {
        run_all(
            &both,
            &Data::x86_64(nr("setsockopt"), &[3, level, name, 0, 4]),
        )
    };
    assert_eq!(sockopt(1, 60), errno(libc::EOPNOTSUPP), "SO_ZEROCOPY");
    assert_eq!(sockopt(1, 7), errno(libc::EOPNOTSUPP), "SO_SNDBUF");
    assert_eq!(sockopt(1, 8), ALLOW, "SO_RCVBUF");
    assert_eq!(sockopt(6, 60), ALLOW, "level TCP, option 60");
    // Out-of-band data: refused; other flags go through.
    let send = |name: &'static str, at: usize, flags: u64| {
        let mut args = [3u64, 0x7f00_0000_0000, 10, 0, 0, 0];
        args[at] = flags;
        run_all(&both, &Data::x86_64(nr(name), &args))
    };
    for (name, at) in [("sendto", 3), ("sendmmsg", 3), ("sendmsg", 2)] {
        assert_eq!(send(name, at, 1), errno(libc::EOPNOTSUPP), "{name} MSG_OOB");
        assert_eq!(
            send(name, at, 0x4040),
            ALLOW,
            "{name} MSG_DONTWAIT|MSG_NOSIGNAL"
        );
    }
    // A thread keeps its process's descriptor table (which /proc/PID/fd lists).
    let clone = |flags: u64| run_all(&both, &Data::x86_64(nr("clone"), &[flags, 0, 0, 0, 0]));
    let thread = 0x10000 | 0x800 | 0x100 | 0x400; // THREAD | SIGHAND | VM | FILES
    assert_eq!(clone(thread), ALLOW, "pthread_create's flags");
    assert_eq!(clone(0x1200011), ALLOW, "fork's flags");
    assert_eq!(
        clone(thread & !0x400),
        errno(libc::EINVAL),
        "a thread with its own table"
    );
    let unshare = |flags: u64| run_all(&both, &Data::x86_64(nr("unshare"), &[flags]));
    assert_eq!(unshare(0x400), errno(libc::EINVAL), "unshare(CLONE_FILES)");
    assert_eq!(unshare(0x200), ALLOW, "unshare(CLONE_FS)");
}

#[test]
fn a_user_policy_cannot_ask_for_notifications() {
    let text =
        "name = \"n\"\n[[deny]]\nsyscall = \"munmap\"\naction = \"user_notif\"\nwhy = \"w\"\n";
    let err = compile_policy_str(text).expect_err("nothing would answer");
    assert!(
        matches!(err, SeccompError::UserNotifReserved { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("memory-watch"), "{err}");
}

/// The peephole pass ([`optimize`]) keeps every answer: each built-in combination and the
/// synthetic policies, before and after, on every syscall number and on random argument
/// vectors drawn from the values around every rule of that syscall (combinations of several
/// rules' values included, which the single-rule probes of the other tests do not reach).
#[test]
fn the_peephole_pass_keeps_every_answer() {
    let (default, watch, pin) = (
        parse_file("default"),
        parse_file("memory-watch"),
        parse_file("cpu-pin"),
    );
    let synthetic = policy::parse(
        "t",
        "name = \"t\"\n\
         [[deny]]\nsyscall = \"socket\"\nwhy = \"x\"\naction = \"trap\"\n\
         args = [{ index = 0, width = 64, op = \"gt\", value = 0x1_0000_0000 }, \
                 { index = 1, width = 32, op = \"masked_eq\", mask = 0xf, value = 5 }]\n\
         [[deny]]\nsyscall = \"socket\"\nwhy = \"x\"\naction = \"trap\"\n\
         args = [{ index = 0, width = 64, op = \"le\", value = 7 }, \
                 { index = 2, width = 64, op = \"ne\", value = 0x2_0000_0003 }]\n\
         [[deny]]\nsyscall = \"mmap\"\nwhy = \"x\"\n\
         args = [{ index = 2, width = 32, op = \"ge\", value = 4 }, { index = 3, width = 32, op = \"lt\", value = 9 }]\n\
         [[deny]]\nsyscall = \"bpf\"\nwhy = \"x\"\n",
    )
    .unwrap();
    let sets: Vec<Vec<&policy::Policy>> = vec![
        vec![&default],
        vec![&default, &watch],
        vec![&default, &pin],
        vec![&default, &watch, &pin],
        vec![&synthetic],
        vec![&synthetic, &default],
    ];
    let mut rand = crate::test_rand::xorshift(0x2545_f491_4f6c_dd1d);
    let mut checked = 0;
    for layers in &sets {
        let plain = assemble(layers).unwrap();
        let opt = optimize(&plain);
        assert!(opt.len() <= plain.len());
        if layers.len() == 1 && layers[0].name == "default" {
            assert!(
                opt.len() * 10 < plain.len() * 8,
                "the pass should shorten the default program: {} -> {}",
                plain.len(),
                opt.len()
            );
        }
        assert_eq!(opt, compile_layered(layers).unwrap());
        for arch in [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386] {
            for n in (0..=520u32).chain([0x4000_0010, 0x7fff_ffff, 0x8000_0000, u32::MAX]) {
                // Every value around every rule on this syscall, for every argument.
                let mut pool = vec![0u64, u64::MAX, 1 << 32];
                for p in layers {
                    for group in p.groups.values() {
                        for conds in group.get(&n).into_iter().flatten() {
                            for c in conds {
                                pool.extend([
                                    c.value,
                                    c.value | 1 << 32,
                                    c.value.wrapping_add(1),
                                    c.value.wrapping_sub(1),
                                    c.value | !c.mask,
                                    c.value & c.mask,
                                ]);
                            }
                        }
                    }
                }
                let rounds = if pool.len() > 3 { 400 } else { 2 };
                for _ in 0..rounds {
                    let mut args = [0u64; 6];
                    for a in &mut args {
                        *a = pool[rand(pool.len())];
                    }
                    let d = Data {
                        nr: n as i32,
                        arch,
                        args,
                    };
                    assert_eq!(
                        run(&opt, &d),
                        run(&plain, &d),
                        "nr {n:#x} arch {arch:#x} args {args:x?}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 20_000, "{checked}");
}

/// A program with an instruction the pass does not model comes back as it was.
#[test]
fn the_peephole_pass_leaves_what_it_does_not_model() {
    let i = |code: u16, jt: u8, jf: u8, k: u32| seccompiler::sock_filter { code, jt, jf, k };
    // `ld [0]; tax; ja 0; ret ALLOW`: tax (BPF_MISC) is not modelled.
    let p = vec![
        i(BPF_LD_W_ABS, 0, 0, 0),
        i(0x07, 0, 0, 0),
        i(0x05, 0, 0, 0),
        i(0x06, 0, 0, ALLOW),
    ];
    assert_eq!(optimize(&p), p);
    // The same without it: the `ja 0` and the load nobody reads... stay only as far as modelled:
    // the load is kept (the pass does not remove dead stores), the jump to the next goes.
    let q = vec![
        i(BPF_LD_W_ABS, 0, 0, 0),
        i(0x05, 0, 0, 0),
        i(0x06, 0, 0, ALLOW),
    ];
    assert_eq!(
        optimize(&q),
        vec![i(BPF_LD_W_ABS, 0, 0, 0), i(0x06, 0, 0, ALLOW)]
    );
    // Nothing: nothing.
    assert_eq!(optimize(&[]), Vec::new());
    // A jump past the end is not a program to touch.
    let r = vec![i(0x05, 0, 0, 5), i(0x06, 0, 0, ALLOW)];
    assert_eq!(optimize(&r), r);
}

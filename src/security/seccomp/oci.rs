//! `linux.seccomp` → one classic-BPF program (seccompiler's `sock_filter`). Pure.
//!
//! What it means, as the linear program the tests compare with:
//!
//! ```text
//! arch:   ld arch; jeq AUDIT_ARCH_I386 → i386 part (only when `architectures` lists
//!         SCMP_ARCH_X86); jeq AUDIT_ARCH_X86_64 or ret KILL_PROCESS
//! x86_64: ld nr;   nr >= 0x40000000 → ret KILL_PROCESS           (x32)
//!         nr > HIGHEST → ret ERRNO(ENOSYS)   (when defaultAction is an errno; see `enosys_stub`)
//!         rules: per (syscall, entry), in config order: ld nr; jeq NR or skip; the argument
//!         comparisons (64-bit, as libseccomp compares them) or skip; ret ACTION. An entry
//!         whose args name some index twice gives one rule per condition (see `rules`).
//!         ret defaultAction
//! i386:   ld nr; the ENOSYS stub; the rules with the i386 numbers of the same names, their
//!         comparisons on the low 32 bits of each argument and value (all an i386 call has,
//!         as libseccomp compares them, see `condition`), and for a socket or SysV IPC call
//!         the same rule again on its multiplexer, socketcall or ipc (see `Multiplexed`);
//!         ret defaultAction
//! ```
//!
//! What is installed (see [`compile`]): the same architecture check, then in each part the
//! same head, a binary search on the syscall number into that syscall's rules (in config
//! order, without their `ld nr; jeq NR`), each number's ending in `ret defaultAction`; then
//! the peephole pass of cordon's own policies.
//!
//! The first matching rule decides. seccompiler 0.5 gives a filter one match action, which
//! cannot express an OCI policy (an allow-list with a default errno, and per-entry errnos),
//! so the program is assembled here and installed as is.
//!
//! Calls of 32-bit programs (i386) are filtered by the policy when `architectures` lists
//! SCMP_ARCH_X86, as runc and crun do (podman's and Docker's default profiles list it), and
//! killed otherwise. x32 calls are killed even when SCMP_ARCH_X32 is listed: the x32 ABI is
//! off in most kernels and no container engine's image uses it. Syscall names an
//! architecture's table does not know are skipped there, as libseccomp-based runtimes do
//! (policies list syscalls of every architecture and of newer kernels); `--debug` logs those
//! no filtered architecture knows.

use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompOperator};
use seccompiler::sock_filter;

/// Why `linux.seccomp` cannot be installed.
#[derive(Debug, thiserror::Error)]
pub enum OciSeccompError {
    #[error("config.json: `{field}` is not supported by cordon-oci: {why}")]
    Unsupported { field: String, why: String },
    #[error("config.json: `{field}` is invalid: {why}")]
    Invalid { field: String, why: String },
}

/// The compiled filter and what the compiler noticed.
#[derive(Debug, Clone)]
pub struct OciFilter {
    pub program: Vec<sock_filter>,
    /// `SECCOMP_FILTER_FLAG_*` for seccomp(2).
    pub flags: libc::c_ulong,
    /// Names that are syscalls of no filtered architecture (skipped).
    pub unknown: Vec<String>,
}

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// EM_386 (3) | __AUDIT_ARCH_LE (include/uapi/linux/audit.h).
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const X32_BIT: u32 = 0x4000_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_KILL_THREAD: u32 = 0;
const RET_TRAP: u32 = 0x0003_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_TRACE: u32 = 0x7ff0_0000;
const RET_LOG: u32 = 0x7ffc_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ: u16 = 0x15;
const JGT: u16 = 0x25;
const JGE: u16 = 0x35;
const JA: u16 = 0x05;
const AND: u16 = 0x54;
const RET: u16 = 0x06;

/// Where a jump of a condition goes.
#[derive(Clone, Copy)]
enum Tgt {
    /// The next instruction.
    Next,
    /// This rule does not match: the next rule.
    Fail,
    /// This condition holds: the next condition (end of this condition's block).
    Pass,
}

#[derive(Clone)]
struct Ins {
    code: u16,
    k: u32,
    jt: Tgt,
    jf: Tgt,
}

fn ins(code: u16, k: u32) -> Ins {
    Ins {
        code,
        k,
        jt: Tgt::Next,
        jf: Tgt::Next,
    }
}

fn jmp(code: u16, k: u32, jt: Tgt, jf: Tgt) -> Ins {
    Ins { code, k, jt, jf }
}

fn action(a: LinuxSeccompAction, errno: Option<u32>, field: &str) -> Result<u32, OciSeccompError> {
    // The kernel caps an errno at 4095 (MAX_ERRNO); larger values used to be cut to 16
    // bits here (65537 became EPERM): say so instead.
    let data = errno.unwrap_or(libc::EPERM as u32);
    if data > 4095 && matches!(a, LinuxSeccompAction::ScmpActErrno) {
        let f = field.strip_suffix(".action").unwrap_or(field);
        let name = if f.ends_with("defaultAction") {
            "linux.seccomp.defaultErrnoRet".to_string()
        } else {
            format!("{f}.errnoRet")
        };
        return Err(OciSeccompError::Invalid {
            field: name,
            why: format!("{data} is not an errno (1-4095)"),
        });
    }
    Ok(match a {
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => RET_KILL_THREAD,
        LinuxSeccompAction::ScmpActKillProcess => RET_KILL_PROCESS,
        LinuxSeccompAction::ScmpActTrap => RET_TRAP,
        LinuxSeccompAction::ScmpActErrno => RET_ERRNO | data,
        LinuxSeccompAction::ScmpActTrace => RET_TRACE | data,
        LinuxSeccompAction::ScmpActLog => RET_LOG,
        LinuxSeccompAction::ScmpActAllow => RET_ALLOW,
        LinuxSeccompAction::ScmpActNotify => {
            return Err(OciSeccompError::Unsupported {
                field: field.into(),
                why: "SCMP_ACT_NOTIFY (user notification) is not implemented".into(),
            });
        }
    })
}

/// The ABIs a filter tells apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Abi {
    X86_64,
    I386,
}

impl Abi {
    fn number(self, name: &str) -> Option<u32> {
        match self {
            Abi::X86_64 => crate::security::seccomp::syscall_number(name),
            Abi::I386 => super::syscalls_i386::number(name),
        }
    }

    /// The way `name` is called through a multiplexer on this ABI (i386's socketcall and
    /// ipc), if there is one.
    fn multiplexed(self, name: &str) -> Option<Multiplexed> {
        match self {
            Abi::X86_64 => None,
            Abi::I386 => Multiplexed::of(name),
        }
    }

    /// Whether a rule naming `name` applies to some call of this ABI.
    fn knows(self, name: &str) -> bool {
        self.number(name).is_some() || self.multiplexed(name).is_some()
    }
}

/// The instructions of one argument comparison (unsigned): 64-bit for x86_64; for i386, as
/// libseccomp makes them for a 32-bit architecture (runc's and crun's filters): the low 32
/// bits of the argument against the low 32 bits of the value (and mask), so that a value
/// written for x86_64 as a sign-extended negative number (-1 as 0xffff_ffff_ffff_ffff)
/// matches the same number of an i386 call (0xffff_ffff). The high half of
/// `seccomp_data.args` is never read there: a 64-bit process making an i386 call through
/// `int 0x80` can put anything in it, and the kernel ignores it. MASKED_EQ compares
/// `arg & mask` with `valueTwo & mask`, as libseccomp does on either architecture.
fn condition(abi: Abi, index: usize, op: LinuxSeccompOperator, value: u64, two: u64) -> Vec<Ins> {
    let lo_off = 16 + 8 * index as u32;
    let hi_off = lo_off + 4;
    let (vhi, vlo) = ((value >> 32) as u32, value as u32);
    let ld_hi = ins(LD_W_ABS, hi_off);
    let ld_lo = ins(LD_W_ABS, lo_off);
    use LinuxSeccompOperator::*;
    if abi == Abi::I386 {
        return match op {
            ScmpCmpEq => vec![ld_lo, jmp(JEQ, vlo, Tgt::Pass, Tgt::Fail)],
            ScmpCmpNe => vec![ld_lo, jmp(JEQ, vlo, Tgt::Fail, Tgt::Pass)],
            ScmpCmpMaskedEq => vec![
                ld_lo,
                ins(AND, vlo),
                jmp(JEQ, two as u32 & vlo, Tgt::Pass, Tgt::Fail),
            ],
            ScmpCmpGt => vec![ld_lo, jmp(JGT, vlo, Tgt::Pass, Tgt::Fail)],
            ScmpCmpGe => vec![ld_lo, jmp(JGE, vlo, Tgt::Pass, Tgt::Fail)],
            // lo < v  ⇔ !(lo >= v);  lo <= v ⇔ !(lo > v)
            ScmpCmpLt => vec![ld_lo, jmp(JGE, vlo, Tgt::Fail, Tgt::Pass)],
            ScmpCmpLe => vec![ld_lo, jmp(JGT, vlo, Tgt::Fail, Tgt::Pass)],
        };
    }
    match op {
        ScmpCmpEq => vec![
            ld_hi,
            jmp(JEQ, vhi, Tgt::Next, Tgt::Fail),
            ld_lo,
            jmp(JEQ, vlo, Tgt::Pass, Tgt::Fail),
        ],
        ScmpCmpNe => vec![
            ld_hi,
            jmp(JEQ, vhi, Tgt::Next, Tgt::Pass),
            ld_lo,
            jmp(JEQ, vlo, Tgt::Fail, Tgt::Pass),
        ],
        ScmpCmpMaskedEq => {
            // OCI: `value` is the mask, `valueTwo` the expected value (libseccomp's order).
            let (mhi, mlo) = ((value >> 32) as u32, value as u32);
            let two = two & value;
            let (dhi, dlo) = ((two >> 32) as u32, two as u32);
            vec![
                ld_hi,
                ins(AND, mhi),
                jmp(JEQ, dhi, Tgt::Next, Tgt::Fail),
                ld_lo,
                ins(AND, mlo),
                jmp(JEQ, dlo, Tgt::Pass, Tgt::Fail),
            ]
        }
        ScmpCmpGt | ScmpCmpGe => {
            let lo_op = if op == ScmpCmpGt { JGT } else { JGE };
            vec![
                ld_hi,
                jmp(JGT, vhi, Tgt::Pass, Tgt::Next),
                jmp(JEQ, vhi, Tgt::Next, Tgt::Fail),
                ld_lo,
                jmp(lo_op, vlo, Tgt::Pass, Tgt::Fail),
            ]
        }
        ScmpCmpLt | ScmpCmpLe => {
            // lo < v  ⇔ !(lo >= v);  lo <= v ⇔ !(lo > v)
            let lo_op = if op == ScmpCmpLt { JGE } else { JGT };
            vec![
                ld_hi,
                jmp(JGE, vhi, Tgt::Next, Tgt::Pass),
                jmp(JEQ, vhi, Tgt::Next, Tgt::Fail),
                ld_lo,
                jmp(lo_op, vlo, Tgt::Fail, Tgt::Pass),
            ]
        }
    }
}

fn offset(from: usize, to: usize, field: &str) -> Result<u8, OciSeccompError> {
    u8::try_from(to - from - 1).map_err(|_| OciSeccompError::Invalid {
        field: field.into(),
        why: "an entry's argument rules are too long for one BPF jump".into(),
    })
}

/// The kernel's limit on a program's length (BPF_MAXINSNS).
const MAX_INSNS: usize = 4096;

/// Compiles the config's seccomp object: the guard, then a binary search on the syscall
/// number (`compile::dispatch_or`, as cordon's own policies have) into the rules of that
/// syscall in the config's order, each number's ending in the default action; then the
/// peephole pass cordon's own policies get (`compile::optimize`). The first matching rule
/// decides, as in the linear program the module's documentation draws ([`Assembled::linear`],
/// which the tests compare it with): rules of other syscalls never match, so only the order
/// among one syscall's rules matters, and it is kept. The kernel's install cost grows with
/// the program's length and with the work of its per-syscall cache, which runs the program
/// for every syscall number: podman's default profile (an allow-list of 345 x86_64 syscalls)
/// took 816-965 µs to install as the linear program of 1175 instructions, 161-191 µs as a
/// binary search over each number alone, 663 (medians of 300 installs in forked children,
/// over several runs). Searched by spans of numbers that answer alike it is 113 instructions
/// (266 with its i386 part), 0.10 ms (0.13-0.19 ms) on a day the search over single numbers
/// took 0.27-0.32 ms.
pub fn compile(s: &LinuxSeccomp) -> Result<OciFilter, OciSeccompError> {
    let a = assemble(s)?;
    let too_long = |len: usize| OciSeccompError::Invalid {
        field: "linux.seccomp.syscalls".into(),
        why: format!(
            "the policy compiles to {len} BPF instructions; the kernel takes at most \
             {MAX_INSNS}: drop argument conditions the profile does not need, or make the action \
             most entries share the `defaultAction` (syscalls that get the default need no \
             rule)"
        ),
    };
    let parts: Vec<Vec<sock_filter>> = a
        .parts
        .iter()
        .map(|p| {
            let mut part = p.head.clone();
            part.extend(super::compile::dispatch_or(&p.chains, a.default));
            part
        })
        .collect();
    let program = join(&parts);
    // The pass shortens programs like this about two times; one this far over the limit is
    // refused before it spends time on it.
    if program.len() > 16 * MAX_INSNS {
        return Err(too_long(program.len()));
    }
    let program = super::compile::optimize(&program);
    if program.len() > MAX_INSNS {
        return Err(too_long(program.len()));
    }
    Ok(OciFilter {
        program,
        flags: a.flags,
        unknown: a.unknown,
    })
}

/// The architecture check, then the part of each ABI (x86_64's first, then i386's when the
/// policy filters it), each entered with the architecture checked and nothing loaded. Any
/// other architecture is killed.
fn join(parts: &[Vec<sock_filter>]) -> Vec<sock_filter> {
    let f = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let native = &parts[0];
    let mut p = vec![f(LD_W_ABS, 0, 0, 4)];
    if parts.len() > 1 {
        // Over the x86_64 check and part, farther than a conditional jump reaches.
        p.push(f(JEQ, 0, 1, AUDIT_ARCH_I386));
        p.push(f(JA, 0, 0, native.len() as u32 + 2));
    }
    p.push(f(JEQ, 1, 0, AUDIT_ARCH_X86_64));
    p.push(f(RET, 0, 0, RET_KILL_PROCESS));
    for part in parts {
        p.extend(part.iter().cloned());
    }
    p
}

/// For the fuzz target `oci_seccomp` only (feature `fuzzing`): for a `linux.seccomp` object
/// in JSON, the linear program the module's documentation draws, and what [`compile`] makes
/// of the same object.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn linear_and_compiled(json: &str) -> Result<(Vec<sock_filter>, Vec<sock_filter>), String> {
    let s: LinuxSeccomp = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let linear = assemble(&s).map_err(|e| e.to_string())?.linear;
    let compiled = compile(&s).map_err(|e| e.to_string())?.program;
    Ok((linear, compiled))
}

/// One ABI's part of the program.
struct Part {
    /// What runs first: the syscall number loaded, x32's calls killed (x86_64's part), and
    /// the ENOSYS stub; it ends with the syscall number loaded.
    head: Vec<sock_filter>,
    /// Per syscall number (ascending): its rules in the config's order, each failing to the
    /// next, and then `ret default`.
    chains: Vec<(u32, Vec<sock_filter>)>,
    /// The part as the module's documentation draws it.
    #[cfg(any(test, feature = "fuzzing"))]
    linear: Vec<sock_filter>,
}

/// The config's seccomp object, checked and taken apart.
struct Assembled {
    /// x86_64's part, then i386's when `architectures` lists SCMP_ARCH_X86.
    parts: Vec<Part>,
    default: u32,
    flags: libc::c_ulong,
    unknown: Vec<String>,
    /// The program as the module's documentation draws it (what [`compile`] must answer
    /// alike), for the tests and the fuzz target `oci_seccomp`.
    #[cfg(any(test, feature = "fuzzing"))]
    linear: Vec<sock_filter>,
}

fn assemble(s: &LinuxSeccomp) -> Result<Assembled, OciSeccompError> {
    let mut abis = vec![Abi::X86_64];
    for a in s.architectures().iter().flatten() {
        match a {
            Arch::ScmpArchNative | Arch::ScmpArchX86_64 | Arch::ScmpArchX32 => {}
            Arch::ScmpArchX86 => {
                if !abis.contains(&Abi::I386) {
                    abis.push(Abi::I386);
                }
            }
            other => {
                return Err(OciSeccompError::Unsupported {
                    field: "linux.seccomp.architectures".into(),
                    why: format!("{other:?}: cordon-oci filters x86_64 and x86 (i386) only"),
                });
            }
        }
    }
    let mut flags: libc::c_ulong = 0;
    for f in s.flags().iter().flatten() {
        use oci_spec::runtime::LinuxSeccompFilterFlag::*;
        flags |= match f {
            SeccompFilterFlagLog => libc::SECCOMP_FILTER_FLAG_LOG,
            SeccompFilterFlagTsync => libc::SECCOMP_FILTER_FLAG_TSYNC,
            SeccompFilterFlagSpecAllow => libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW,
        };
    }
    let default = action(
        s.default_action(),
        s.default_errno_ret(),
        "linux.seccomp.defaultAction",
    )?;
    let parts = abis
        .iter()
        .map(|&abi| part(s, abi, default))
        .collect::<Result<Vec<_>, _>>()?;
    let unknown = s
        .syscalls()
        .iter()
        .flatten()
        .flat_map(|e| e.names())
        .filter(|n| !abis.iter().any(|abi| abi.knows(n)))
        .cloned()
        .collect();
    #[cfg(any(test, feature = "fuzzing"))]
    let linear = join(&parts.iter().map(|p| p.linear.clone()).collect::<Vec<_>>());
    Ok(Assembled {
        parts,
        default,
        flags,
        unknown,
        #[cfg(any(test, feature = "fuzzing"))]
        linear,
    })
}

/// The part of the program for the calls of `abi`.
fn part(s: &LinuxSeccomp, abi: Abi, default: u32) -> Result<Part, OciSeccompError> {
    let ld_nr = sock_filter {
        code: LD_W_ABS,
        jt: 0,
        jf: 0,
        k: 0,
    };
    let mut head = vec![ld_nr];
    if abi == Abi::X86_64 {
        head.extend([
            sock_filter {
                code: JGE,
                jt: 0,
                jf: 1,
                k: X32_BIT,
            },
            sock_filter {
                code: RET,
                jt: 0,
                jf: 0,
                k: RET_KILL_PROCESS,
            },
        ]);
    }
    head.extend(enosys_stub(s, abi, default));
    #[cfg(any(test, feature = "fuzzing"))]
    let mut linear = head.clone();
    let mut by_nr: std::collections::BTreeMap<u32, Vec<sock_filter>> = Default::default();
    for (i, entry) in s.syscalls().iter().flatten().enumerate() {
        let field = format!("linux.seccomp.syscalls[{i}]");
        let ret = action(
            entry.action(),
            entry.errno_ret(),
            &format!("{field}.action"),
        )?;
        let args = entry.args().as_deref().unwrap_or(&[]);
        let rules = rules(abi, args, &field, None)?;
        // An entry whose action is the default's (errno included) changes nothing, and runc
        // leaves it out: compiled, it would take the call before a later entry for the same
        // syscall could (an allow-by-default profile's later ERRNO entry would never apply).
        if ret == default {
            continue;
        }
        for name in entry.names() {
            let mut ways = Vec::new();
            if let Some(nr) = abi.number(name) {
                ways.push((nr, rules.clone()));
            }
            if let Some(m) = abi.multiplexed(name) {
                ways.push((m.nr, self::rules(abi, args, &field, Some(m))?));
            }
            for (nr, rules) in ways {
                for conds in &rules {
                    push_rule(by_nr.entry(nr).or_default(), None, conds, ret, &field)?;
                    #[cfg(any(test, feature = "fuzzing"))]
                    push_rule(&mut linear, Some(nr), conds, ret, &field)?;
                }
            }
        }
    }
    let ret_default = sock_filter {
        code: RET,
        jt: 0,
        jf: 0,
        k: default,
    };
    #[cfg(any(test, feature = "fuzzing"))]
    linear.push(ret_default.clone());
    Ok(Part {
        head,
        chains: by_nr
            .into_iter()
            .map(|(nr, mut rules)| {
                rules.push(ret_default.clone());
                (nr, rules)
            })
            .collect(),
        #[cfg(any(test, feature = "fuzzing"))]
        linear,
    })
}

/// runc's ENOSYS stub (libcontainer/seccomp/patchbpf): a syscall numbered above every one the
/// profile names is newer than the profile, and its author could not have meant to refuse it
/// with the default errno. With EPERM, the C library takes the call as refused and does not
/// fall back to an older one (fchmodat2 → fchmodat, clone3 → clone); with ENOSYS ("this
/// kernel lacks it") it does. So, when `defaultAction` is an errno other than ENOSYS, such
/// numbers return ENOSYS: two instructions after the guard, `nr` loaded. Other default
/// actions (allow, kill, trap, log, trace) are kept as they are: the stub must not turn a
/// killing default into a softer answer. None without a known syscall name.
fn enosys_stub(s: &LinuxSeccomp, abi: Abi, default: u32) -> Vec<sock_filter> {
    let enosys = RET_ERRNO | libc::ENOSYS as u32;
    if default & 0xffff_0000 != RET_ERRNO || default == enosys {
        return Vec::new();
    }
    let highest = s
        .syscalls()
        .iter()
        .flatten()
        .flat_map(|e| e.names())
        .filter_map(|n| abi.number(n))
        .max();
    let Some(highest) = highest else {
        return Vec::new();
    };
    vec![
        sock_filter {
            code: JGT,
            jt: 0,
            jf: 1,
            k: highest,
        },
        sock_filter {
            code: RET,
            jt: 0,
            jf: 0,
            k: enosys,
        },
    ]
}

/// An entry's `args` as rules, each a list of condition blocks that must all hold; the
/// entry applies when any of its rules matches. This is what runc does (libcontainer/seccomp,
/// `matchCall`), and profiles are written against runc:
///
/// - no argument index appears twice: one rule, all conditions ANDed
///   (`a0 == 16, a2 == 9` matches only when both hold);
/// - some index appears more than once: EVERY condition of the entry is a rule of its own,
///   so all of them are ORed, those on the other indexes too (`a0 == 16, a0 == 17, a2 == 9`
///   matches `a0 == 16`, `a0 == 17` or `a2 == 9`).
fn rules(
    abi: Abi,
    args: &[oci_spec::runtime::LinuxSeccompArg],
    field: &str,
    mux: Option<Multiplexed>,
) -> Result<Vec<Vec<Vec<Ins>>>, OciSeccompError> {
    let mut blocks = Vec::with_capacity(args.len());
    let mut count = [0usize; 6];
    for (j, a) in args.iter().enumerate() {
        if a.index() > 5 {
            return Err(OciSeccompError::Invalid {
                field: format!("{field}.args[{j}].index"),
                why: format!("{} is not an argument index (0-5)", a.index()),
            });
        }
        count[a.index()] += 1;
        let block = condition(
            abi,
            a.index(),
            a.op(),
            a.value(),
            a.value_two().unwrap_or(0),
        );
        blocks.push((a.index(), block));
    }
    let rules: Vec<Vec<(usize, Vec<Ins>)>> = if count.iter().any(|&n| n > 1) {
        blocks.into_iter().map(|b| vec![b]).collect()
    } else {
        vec![blocks]
    };
    // Through the multiplexer, argument 0 is the call's number and the call's own
    // arguments are in memory, out of the filter's reach: the conditions on index 0 give way
    // to the number's (as libseccomp rewrites such a rule), the others stay on the
    // multiplexer's arguments, as libseccomp leaves them.
    Ok(rules
        .into_iter()
        .map(|rule| match mux {
            None => rule.into_iter().map(|(_, b)| b).collect(),
            Some(m) => std::iter::once(m.condition())
                .chain(rule.into_iter().filter(|(i, _)| *i != 0).map(|(_, b)| b))
                .collect(),
        })
        .collect())
}

/// An i386 socket or SysV IPC call made through its multiplexer, `socketcall(2)` or `ipc(2)`,
/// whose first argument names the call. 32-bit programs use them (the C library's older
/// builds always, and for `accept`, `send`, `recv`, `semop` and `semtimedop`, which i386 has
/// no direct number for, any build); libseccomp adds a rule there for every rule on such a
/// call, and so does cordon-oci, or a 32-bit program could pass a policy's rule by the
/// other way in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Multiplexed {
    /// The multiplexer's i386 number.
    nr: u32,
    /// The call's number in its first argument.
    call: u32,
    /// The bits of the first argument the kernel reads as the call's number: all for
    /// socketcall; the low 16 for ipc, whose high half is a version the kernel sets aside.
    mask: u32,
}

impl Multiplexed {
    /// The multiplexed form of the i386 call `name`, if it has one.
    fn of(name: &str) -> Option<Multiplexed> {
        // include/uapi/linux/net.h (SYS_*) and include/uapi/linux/ipc.h (SEMOP...).
        const SOCKETCALL: &[(&str, u32)] = &[
            ("socket", 1),
            ("bind", 2),
            ("connect", 3),
            ("listen", 4),
            ("accept", 5),
            ("getsockname", 6),
            ("getpeername", 7),
            ("socketpair", 8),
            ("send", 9),
            ("recv", 10),
            ("sendto", 11),
            ("recvfrom", 12),
            ("shutdown", 13),
            ("setsockopt", 14),
            ("getsockopt", 15),
            ("sendmsg", 16),
            ("recvmsg", 17),
            ("accept4", 18),
            ("recvmmsg", 19),
            ("sendmmsg", 20),
        ];
        const IPC: &[(&str, u32)] = &[
            ("semop", 1),
            ("semget", 2),
            ("semctl", 3),
            ("semtimedop", 4),
            ("msgsnd", 11),
            ("msgrcv", 12),
            ("msgget", 13),
            ("msgctl", 14),
            ("shmat", 21),
            ("shmdt", 22),
            ("shmget", 23),
            ("shmctl", 24),
        ];
        let find = |table: &[(&str, u32)]| table.iter().find(|(n, _)| *n == name).map(|e| e.1);
        if let Some(call) = find(SOCKETCALL) {
            return Some(Multiplexed {
                nr: 102,
                call,
                mask: u32::MAX,
            });
        }
        find(IPC).map(|call| Multiplexed {
            nr: 117,
            call,
            mask: 0xffff,
        })
    }

    /// The condition "the first argument names this call".
    fn condition(self) -> Vec<Ins> {
        let mut c = vec![ins(LD_W_ABS, 16)];
        if self.mask != u32::MAX {
            c.push(ins(AND, self.mask));
        }
        c.push(jmp(JEQ, self.call, Tgt::Pass, Tgt::Fail));
        c
    }
}

/// Appends one rule to `prog`: its conditions, then `ret`; a condition that fails jumps to
/// the end of the rule (the next rule). With `nr`, the rule first loads the syscall number
/// and fails on another (the linear program); without, it is entered for its syscall only
/// (a chain of the binary search).
fn push_rule(
    prog: &mut Vec<sock_filter>,
    nr: Option<u32>,
    conds: &[Vec<Ins>],
    ret: u32,
    field: &str,
) -> Result<(), OciSeccompError> {
    let mut rule: Vec<(Ins, usize)> = Vec::new(); // (instruction, end of its block)
    if let Some(nr) = nr {
        rule.push((ins(LD_W_ABS, 0), 0));
        rule.push((jmp(JEQ, nr, Tgt::Next, Tgt::Fail), 0));
    }
    for c in conds {
        let end = rule.len() + c.len();
        rule.extend(c.iter().map(|x| (x.clone(), end)));
    }
    rule.push((ins(RET, ret), 0));
    let fail = rule.len();
    for (pos, (x, end)) in rule.iter().enumerate() {
        let resolve = |t: Tgt| -> Result<u8, OciSeccompError> {
            match t {
                Tgt::Next => Ok(0),
                Tgt::Fail => offset(pos, fail, field),
                Tgt::Pass => offset(pos, *end, field),
            }
        };
        prog.push(sock_filter {
            code: x.code,
            jt: resolve(x.jt)?,
            jf: resolve(x.jf)?,
            k: x.k,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::seccomp::bpf_eval::{Data, run};

    fn filter(json: &str) -> OciFilter {
        compile(&serde_json::from_str(json).unwrap()).unwrap()
    }

    fn nr(name: &str) -> u32 {
        crate::security::seccomp::syscall_number(name).unwrap()
    }

    #[test]
    fn allow_list_with_default_errno() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
                "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
                "syscalls": [{"names": ["read", "write", "no_such_call"], "action": "SCMP_ACT_ALLOW"},
                             {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#,
        );
        assert_eq!(f.unknown, ["no_such_call"]);
        assert_eq!(run(&f.program, &Data::x86_64(nr("read"), &[])), RET_ALLOW);
        assert_eq!(run(&f.program, &Data::x86_64(nr("write"), &[])), RET_ALLOW);
        assert_eq!(
            run(&f.program, &Data::x86_64(nr("mkdir"), &[])),
            RET_ERRNO | 1
        );
        assert_eq!(
            run(&f.program, &Data::x86_64(nr("open"), &[])),
            RET_ERRNO | 38
        );
        assert_eq!(
            run(&f.program, &Data::x86_64(nr("read") | X32_BIT, &[])),
            RET_KILL_PROCESS
        );
        // SCMP_ARCH_X86 is listed: i386 calls get the same rules, by their i386 numbers.
        assert_eq!(run(&f.program, &i386("read", &[])), RET_ALLOW);
        assert_eq!(run(&f.program, &i386("mkdir", &[])), RET_ERRNO | 1);
        assert_eq!(run(&f.program, &i386("open", &[])), RET_ERRNO | 38);
        // Another architecture is killed.
        let mut foreign = Data::x86_64(3, &[]);
        foreign.arch = 0xc000_00b7; // AUDIT_ARCH_AARCH64
        assert_eq!(run(&f.program, &foreign), RET_KILL_PROCESS);
        // Without SCMP_ARCH_X86, i386 calls are killed.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X32"],
                "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}"#,
        );
        assert_eq!(run(&f.program, &i386("read", &[])), RET_KILL_PROCESS);
        assert_eq!(run(&f.program, &Data::x86_64(nr("read"), &[])), RET_ALLOW);
        // Nor does the x86_64 table's name list change: names only i386 has are no longer
        // "unknown" once it is filtered.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
                "syscalls": [{"names": ["socketcall", "stat64", "arch_prctl", "no_such_call"], "action": "SCMP_ACT_ALLOW"}]}"#,
        );
        assert_eq!(f.unknown, ["no_such_call"]);
        assert_eq!(run(&f.program, &i386("socketcall", &[])), RET_ALLOW);
        assert_eq!(
            run(&f.program, &Data::x86_64(nr("arch_prctl"), &[])),
            RET_ALLOW
        );
    }

    /// An i386 call of the system call `name`.
    fn i386(name: &str, args: &[u64]) -> Data {
        let mut d = Data::x86_64(super::super::syscalls_i386::number(name).unwrap(), args);
        d.arch = AUDIT_ARCH_I386;
        d
    }

    // i386 arguments are 32-bit, compared as libseccomp compares them for a 32-bit
    // architecture: the low halves of the argument and of the value. The high half of
    // `seccomp_data.args`, which a 64-bit process's `int 0x80` can fill, is never read; a
    // value written for x86_64 as a sign-extended negative number matches the i386 one.
    #[test]
    fn i386_argument_comparisons_read_the_low_32_bits() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86"],
                "syscalls": [
                  {"names": ["personality"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
                  {"names": ["clone"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
                  {"names": ["kill"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 18446744073709551615, "op": "SCMP_CMP_EQ"}]},
                  {"names": ["tkill"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 18446744071562067968, "op": "SCMP_CMP_GE"}]},
                  {"names": ["dup"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 18446744073709551615, "op": "SCMP_CMP_NE"}]},
                  {"names": ["dup2"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 1, "value": 255, "valueTwo": 4294967305, "op": "SCMP_CMP_MASKED_EQ"}]},
                  {"names": ["close"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 4294967296, "op": "SCMP_CMP_LT"}]},
                  {"names": ["umask"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 9, "op": "SCMP_CMP_LE"}]}
                ]}"#,
        );
        let r = |name: &str, args: &[u64]| run(&f.program, &i386(name, args));
        let e = RET_ERRNO | 1;
        assert_eq!(r("personality", &[8]), e);
        assert_eq!(
            r("personality", &[8 | 0xdead_beef << 32]),
            e,
            "high half read"
        );
        assert_eq!(r("personality", &[9]), RET_ALLOW);
        assert_eq!(r("clone", &[0x11]), e);
        assert_eq!(r("clone", &[0x11 | 0xffff_ffff << 32]), e, "high half read");
        assert_eq!(r("clone", &[0x1000_0011]), RET_ALLOW);
        // -1 (EQ), any negative pid (GE -2^31), all but -1 (NE): as i386 passes them.
        assert_eq!(r("kill", &[0xffff_ffff, 9]), e);
        assert_eq!(r("kill", &[1, 9]), RET_ALLOW);
        assert_eq!(r("tkill", &[0x8000_0000, 9]), e);
        assert_eq!(r("tkill", &[0xffff_ffff, 9]), e);
        assert_eq!(r("tkill", &[0x7fff_ffff, 9]), RET_ALLOW);
        assert_eq!(r("dup", &[0xffff_ffff]), RET_ALLOW);
        assert_eq!(r("dup", &[3]), e);
        // MASKED_EQ compares valueTwo masked too: (a1 & 255) == 9.
        assert_eq!(r("dup2", &[0, 9]), e);
        assert_eq!(r("dup2", &[0, 0x109]), e);
        assert_eq!(r("dup2", &[0, 10]), RET_ALLOW);
        // LT 1<<32 is LT 0 on 32 bits: never.
        assert_eq!(r("close", &[0]), RET_ALLOW);
        assert_eq!(r("umask", &[9]), e);
        assert_eq!(r("umask", &[10]), RET_ALLOW);
        assert_eq!(r("umask", &[9 | 1 << 32]), e, "high half read");
        // x86_64 calls compare all 64 bits.
        let r64 = |name: &str, args: &[u64]| run(&f.program, &Data::x86_64(nr(name), args));
        assert_eq!(r64("personality", &[8 | 1 << 32]), RET_ALLOW);
        assert_eq!(r64("kill", &[0xffff_ffff, 9]), RET_ALLOW);
        assert_eq!(r64("kill", &[u64::MAX, 9]), e);
        assert_eq!(r64("dup2", &[0, 9]), e, "valueTwo masked on x86_64 too");
    }

    // A rule on a socket or SysV IPC call holds for i386 calls through socketcall(2) and
    // ipc(2) too (as libseccomp adds it there): argument 0 names the call, the rule's other
    // conditions stay, its conditions on argument 0 (which the multiplexer does not carry)
    // give way. ipc's version bits (the high 16) do not hide the call.
    #[test]
    fn i386_socket_and_ipc_rules_hold_through_their_multiplexers() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
                "syscalls": [
                  {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97,
                   "args": [{"index": 0, "value": 40, "op": "SCMP_CMP_EQ"}]},
                  {"names": ["accept", "recv"], "action": "SCMP_ACT_ERRNO", "errnoRet": 2},
                  {"names": ["setsockopt"], "action": "SCMP_ACT_ERRNO", "errnoRet": 3,
                   "args": [{"index": 1, "value": 7, "op": "SCMP_CMP_EQ"}]},
                  {"names": ["shmget", "semop"], "action": "SCMP_ACT_ERRNO", "errnoRet": 4}
                ]}"#,
        );
        let mux = |nr: u32, args: &[u64]| {
            let mut d = Data::x86_64(nr, args);
            d.arch = AUDIT_ARCH_I386;
            run(&f.program, &d)
        };
        // socket: the direct call by its argument, the multiplexed one by its number.
        assert_eq!(run(&f.program, &i386("socket", &[40])), RET_ERRNO | 97);
        assert_eq!(run(&f.program, &i386("socket", &[2])), RET_ALLOW);
        assert_eq!(mux(102, &[1, 0x1000]), RET_ERRNO | 97);
        assert_eq!(mux(102, &[2, 0x1000]), RET_ALLOW, "bind");
        // Calls only the multiplexer reaches on i386.
        assert_eq!(mux(102, &[5]), RET_ERRNO | 2);
        assert_eq!(mux(102, &[10]), RET_ERRNO | 2);
        assert_eq!(mux(102, &[5 | 1 << 32]), RET_ERRNO | 2, "high half read");
        // Conditions on other indexes stay, on the multiplexer's own arguments.
        assert_eq!(mux(102, &[14, 7]), RET_ERRNO | 3);
        assert_eq!(mux(102, &[14, 8]), RET_ALLOW);
        assert_eq!(run(&f.program, &i386("setsockopt", &[3, 7])), RET_ERRNO | 3);
        // ipc, with and without version bits.
        assert_eq!(mux(117, &[23]), RET_ERRNO | 4);
        assert_eq!(mux(117, &[23 | 1 << 16]), RET_ERRNO | 4);
        assert_eq!(mux(117, &[1]), RET_ERRNO | 4, "semop");
        assert_eq!(mux(117, &[21]), RET_ALLOW, "shmat");
        assert_eq!(run(&f.program, &i386("shmget", &[])), RET_ERRNO | 4);
        // x86_64 has no multiplexer: its numbers 102 and 117 are getuid and setresuid.
        assert_eq!(run(&f.program, &Data::x86_64(102, &[1])), RET_ALLOW);
        assert_eq!(
            run(&f.program, &Data::x86_64(nr("accept"), &[])),
            RET_ERRNO | 2
        );
        // Names only a multiplexer reaches on i386 are not unknown.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86"],
                "syscalls": [{"names": ["recv", "send", "semop", "no_such_call"], "action": "SCMP_ACT_ALLOW"}]}"#,
        );
        assert_eq!(f.unknown, ["no_such_call"]);
    }

    // The ENOSYS stub of the i386 part is computed from the i386 numbers.
    #[test]
    fn i386_calls_newer_than_the_profile_get_enosys() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86"],
                "syscalls": [{"names": ["read", "openat"], "action": "SCMP_ACT_ALLOW"}]}"#,
        );
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        // openat is 295 on i386 (257 on x86_64).
        assert_eq!(run(&f.program, &i386("openat", &[])), RET_ALLOW);
        assert_eq!(run(&f.program, &i386("mkdir", &[])), RET_ERRNO | 1);
        assert_eq!(run(&f.program, &i386("fchmodat2", &[])), enosys);
        let mut above = i386("read", &[]);
        above.nr = 296;
        assert_eq!(run(&f.program, &above), enosys);
        above.nr = 295;
        assert_eq!(run(&f.program, &above), RET_ALLOW);
        // x86_64's part has its own highest number, openat's 257: 258 is mkdirat.
        assert_eq!(run(&f.program, &Data::x86_64(258, &[])), enosys);
        assert_eq!(run(&f.program, &Data::x86_64(83, &[])), RET_ERRNO | 1);
    }

    #[test]
    fn argument_comparisons_are_64_bit() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [
                  {"names": ["personality"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
                  {"names": ["clone"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 268435456, "valueTwo": 268435456, "op": "SCMP_CMP_MASKED_EQ"}]},
                  {"names": ["dup"], "action": "SCMP_ACT_KILL_PROCESS",
                   "args": [{"index": 0, "value": 4294967300, "op": "SCMP_CMP_GT"}]},
                  {"names": ["dup2"], "action": "SCMP_ACT_TRAP",
                   "args": [{"index": 1, "value": 10, "op": "SCMP_CMP_LE"},
                            {"index": 0, "value": 3, "op": "SCMP_CMP_NE"}]}
                ]}"#,
        );
        let r = |name: &str, args: &[u64]| run(&f.program, &Data::x86_64(nr(name), args));
        assert_eq!(r("personality", &[8]), RET_ERRNO | 1);
        assert_eq!(r("personality", &[8 | 1 << 32]), RET_ALLOW);
        assert_eq!(r("personality", &[9]), RET_ALLOW);
        assert_eq!(r("clone", &[0x1000_0011]), RET_ERRNO | 1);
        assert_eq!(r("clone", &[0x11]), RET_ALLOW);
        assert_eq!(r("dup", &[4294967301]), RET_KILL_PROCESS);
        assert_eq!(r("dup", &[4294967300]), RET_ALLOW);
        assert_eq!(r("dup", &[5]), RET_ALLOW);
        assert_eq!(r("dup2", &[4, 10]), RET_TRAP);
        assert_eq!(r("dup2", &[3, 10]), RET_ALLOW);
        assert_eq!(r("dup2", &[4, 11]), RET_ALLOW);
        assert_eq!(r("dup2", &[4, 1 << 32]), RET_ALLOW);
    }

    /// As runc: an entry with the default's action is left out, so it cannot take a call
    /// that a later entry for the same syscall acts on.
    #[test]
    fn an_entry_with_the_default_action_does_not_shadow_a_later_one() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["socket"], "action": "SCMP_ACT_ALLOW"},
                             {"names": ["socket"], "action": "SCMP_ACT_ERRNO",
                              "args": [{"index": 0, "value": 16, "op": "SCMP_CMP_EQ"}]}]}"#,
        );
        let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr("socket"), args));
        assert_eq!(r(&[16, 3, 0]), RET_ERRNO | 1);
        assert_eq!(r(&[2, 1, 0]), RET_ALLOW);
        // Another errno is another action: that entry stays, first in order.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97},
                             {"names": ["socket"], "action": "SCMP_ACT_ALLOW"}]}"#,
        );
        let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr("socket"), args));
        assert_eq!(r(&[2, 1, 0]), RET_ERRNO | 97);
    }

    #[test]
    fn a_repeated_index_makes_every_condition_a_rule_of_its_own() {
        // As runc (matchCall): index 0 appears twice, so each condition is its own rule,
        // the one on index 2 included: a0 == 16 OR a0 == 17 OR a2 == 9.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["socket"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 16, "op": "SCMP_CMP_EQ"},
                            {"index": 0, "value": 17, "op": "SCMP_CMP_EQ"},
                            {"index": 2, "value": 9, "op": "SCMP_CMP_EQ"}]}]}"#,
        );
        let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr("socket"), args));
        assert_eq!(r(&[16, 3, 0]), RET_ERRNO | 1);
        assert_eq!(r(&[17, 3, 0]), RET_ERRNO | 1);
        assert_eq!(r(&[5, 3, 9]), RET_ERRNO | 1);
        assert_eq!(r(&[16, 3, 9]), RET_ERRNO | 1);
        assert_eq!(r(&[2, 1, 0]), RET_ALLOW);
        // The repeated index may come after the others; a1 <= 10 alone matches too.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["dup2", "dup3"], "action": "SCMP_ACT_TRAP",
                   "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"},
                            {"index": 1, "value": 10, "op": "SCMP_CMP_LE"},
                            {"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}]}]}"#,
        );
        for name in ["dup2", "dup3"] {
            let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr(name), args));
            assert_eq!(r(&[1, 10]), RET_TRAP);
            assert_eq!(r(&[2, 0]), RET_TRAP);
            assert_eq!(r(&[1, 11]), RET_TRAP);
            assert_eq!(r(&[3, 5]), RET_TRAP);
            assert_eq!(r(&[3, 11]), RET_ALLOW);
        }
        // An allow-list entry with alternatives allows each, nothing else.
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                   "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"},
                            {"index": 0, "value": 8, "op": "SCMP_CMP_EQ"},
                            {"index": 0, "value": 4294967295, "op": "SCMP_CMP_EQ"}]}]}"#,
        );
        let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr("personality"), args));
        for ok in [0, 8, 4294967295] {
            assert_eq!(r(&[ok]), RET_ALLOW, "{ok}");
        }
        assert_eq!(r(&[9]), RET_ERRNO | 1);
    }

    #[test]
    fn distinct_indexes_are_one_rule_of_anded_conditions() {
        let f = filter(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["socket"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 16, "op": "SCMP_CMP_EQ"},
                            {"index": 2, "value": 9, "op": "SCMP_CMP_EQ"}]}]}"#,
        );
        let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr("socket"), args));
        assert_eq!(r(&[16, 3, 9]), RET_ERRNO | 1);
        assert_eq!(r(&[16, 3, 8]), RET_ALLOW);
        assert_eq!(r(&[5, 3, 9]), RET_ALLOW);
    }

    #[test]
    fn many_conditions_on_every_index_compile_and_each_matches() {
        // 18 conditions, 3 per index: 18 rules (runc's shape), not 3^6 combinations.
        let args: Vec<String> = (0..6)
            .flat_map(|i| {
                (0..3).map(move |v| {
                    format!(
                        r#"{{"index": {i}, "value": {}, "op": "SCMP_CMP_EQ"}}"#,
                        100 + v
                    )
                })
            })
            .collect();
        let f = filter(&format!(
            r#"{{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{}]}}]}}"#,
            args.join(",")
        ));
        let r = |args: &[u64]| run(&f.program, &Data::x86_64(nr("read"), args));
        for i in 0..6 {
            let mut a = [0u64; 6];
            a[i] = 102;
            assert_eq!(r(&a), RET_ERRNO | 1, "index {i}");
        }
        assert_eq!(r(&[0; 6]), RET_ALLOW);
    }

    #[test]
    fn an_argument_index_out_of_range_names_the_field() {
        let s: LinuxSeccomp = serde_json::from_str(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO",
                   "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"},
                            {"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]}"#,
        )
        .unwrap();
        let e = compile(&s).unwrap_err().to_string();
        assert!(e.contains("linux.seccomp.syscalls[0].args[1].index"), "{e}");
    }

    #[test]
    fn an_errno_out_of_range_names_the_field() {
        let s: LinuxSeccomp = serde_json::from_str(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 65537}]}"#,
        )
        .unwrap();
        let e = compile(&s).unwrap_err().to_string();
        assert!(
            e.contains("linux.seccomp.syscalls[0].errnoRet") && e.contains("65537"),
            "{e}"
        );
        let s: LinuxSeccomp =
            serde_json::from_str(r#"{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 5000}"#)
                .unwrap();
        let e = compile(&s).unwrap_err().to_string();
        assert!(e.contains("linux.seccomp.defaultErrnoRet"), "{e}");
    }

    #[test]
    fn unsupported_actions_and_arches_name_the_field() {
        let e = compile(
            &serde_json::from_str(
                r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_AARCH64"]}"#,
            )
            .unwrap(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("`linux.seccomp.architectures`"),
            "{e}"
        );
        let e = compile(
            &serde_json::from_str(
                r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]}"#,
            )
            .unwrap(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("`linux.seccomp.syscalls[0].action`"),
            "{e}"
        );
    }

    /// A profile like container engines' defaults: an allow-list of every syscall the table
    /// knows, entries with argument conditions of every operator (one with a repeated index),
    /// and entries whose actions differ from the default.
    fn engine_like_profile() -> String {
        let names: Vec<String> = crate::security::seccomp::syscalls::X86_64
            .iter()
            .filter(|(n, _)| !["clone", "personality", "socket", "kill"].contains(n))
            .map(|(n, _)| format!("\"{n}\""))
            .collect();
        format!(
            r#"{{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
                "syscalls": [
                  {{"names": [{}], "action": "SCMP_ACT_ALLOW"}},
                  {{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                    "args": [{{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}}]}},
                  {{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                    "args": [{{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}}]}},
                  {{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                    "args": [{{"index": 0, "value": 4294967295, "op": "SCMP_CMP_EQ"}}]}},
                  {{"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                    "args": [{{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}}]}},
                  {{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97,
                    "args": [{{"index": 0, "value": 16, "op": "SCMP_CMP_EQ"}},
                             {{"index": 0, "value": 17, "op": "SCMP_CMP_EQ"}}]}},
                  {{"names": ["socket"], "action": "SCMP_ACT_ALLOW",
                    "args": [{{"index": 0, "value": 40, "op": "SCMP_CMP_LT"}},
                             {{"index": 2, "value": 4294967296, "op": "SCMP_CMP_NE"}}]}},
                  {{"names": ["kill"], "action": "SCMP_ACT_ALLOW",
                    "args": [{{"index": 1, "value": 9, "op": "SCMP_CMP_LE"}},
                             {{"index": 0, "value": 1, "op": "SCMP_CMP_GT"}}]}},
                  {{"names": ["kill"], "action": "SCMP_ACT_KILL_PROCESS",
                    "args": [{{"index": 1, "value": 19, "op": "SCMP_CMP_GE"}}]}},
                  {{"names": ["mkdir", "rmdir"], "action": "SCMP_ACT_TRAP"}}
                ]}}"#,
            names.join(",")
        )
    }

    #[test]
    fn the_installed_program_answers_as_the_linear_one() {
        let allow_by_default = r#"{"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [
              {"names": ["ptrace", "bpf"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
              {"names": ["ioctl"], "action": "SCMP_ACT_ERRNO",
               "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]},
              {"names": ["ioctl"], "action": "SCMP_ACT_LOG",
               "args": [{"index": 1, "value": 4294901760, "valueTwo": 21504, "op": "SCMP_CMP_MASKED_EQ"}]},
              {"names": ["mmap"], "action": "SCMP_ACT_KILL",
               "args": [{"index": 2, "value": 7, "op": "SCMP_CMP_EQ"},
                        {"index": 3, "value": 18446744073709551615, "op": "SCMP_CMP_NE"}]}
            ]}"#;
        let engine = engine_like_profile();
        // One syscall with rules far longer than a conditional jump reaches (255): the
        // binary search goes around its chain through `ja`, and the pass cannot thread
        // every jump to the end.
        let long_chain = format!(
            r#"{{"defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"}},{}]}}"#,
            (0..80)
                .map(|v| format!(
                    r#"{{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                        "args": [{{"index": 0, "value": {v}, "op": "SCMP_CMP_EQ"}},
                                 {{"index": 1, "value": 8, "op": "SCMP_CMP_GE"}}]}}"#
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
        let mut rand = crate::test_rand::xorshift(0x9e37_79b9_7f4a_7c15);
        let pool = [
            0u64,
            1,
            2,
            7,
            8,
            9,
            10,
            16,
            17,
            19,
            20,
            39,
            40,
            21504,
            21522,
            2114060288,
            0x7e02_0000 | 0x11,
            4294967295,
            4294967296,
            1 << 40,
            u64::MAX,
            u64::MAX - 1,
        ];
        // Each profile as it is (i386 calls killed) and with i386 filtered too.
        let with_i386 = |t: &str| {
            t.replacen(
                '{',
                r#"{"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"], "#,
                1,
            )
        };
        let mut profiles = Vec::new();
        for (text, shorter_by) in [
            (engine.clone(), 0.4),
            (allow_by_default.to_string(), 0.0),
            (long_chain.clone(), 0.0),
        ] {
            // The i386 part finds fewer of the names (x86_64's), and shortens less.
            profiles.push((with_i386(&text), shorter_by * 0.75));
            profiles.push((text, shorter_by));
        }
        for (text, shorter_by) in &profiles {
            let s: LinuxSeccomp = serde_json::from_str(text).unwrap();
            let plain = assemble(&s).unwrap().linear;
            let opt = compile(&s).unwrap().program;
            assert!(
                (opt.len() as f64) <= plain.len() as f64 * (1.0 - shorter_by),
                "{} -> {} instructions",
                plain.len(),
                opt.len()
            );
            for arch in [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, 0xc000_00b7] {
                for n in (0..=470u32).chain([X32_BIT, X32_BIT | 1, u32::MAX]) {
                    for _ in 0..40 {
                        let d = Data {
                            nr: n as i32,
                            arch,
                            args: [(); 6].map(|()| pool[rand(pool.len())]),
                        };
                        assert_eq!(run(&opt, &d), run(&plain, &d), "{d:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_policy_too_long_for_the_kernel_is_refused_with_its_length() {
        // Every syscall with three conditions of its own (the same ones on consecutive
        // numbers would be one span of the search): long even after the pass.
        let names: Vec<&str> = crate::security::seccomp::syscalls::X86_64
            .iter()
            .map(|(n, _)| *n)
            .collect();
        let entries: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    r#"{{"names": ["{n}"], "action": "SCMP_ACT_ALLOW", "args": [
                        {{"index": 0, "value": {}, "op": "SCMP_CMP_GT"}},
                        {{"index": 1, "value": 6, "op": "SCMP_CMP_GT"}},
                        {{"index": 2, "value": 7, "op": "SCMP_CMP_GT"}}]}}"#,
                    5 + i
                )
            })
            .collect();
        let text = format!(
            r#"{{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{}]}}"#,
            entries.join(",")
        );
        let s: LinuxSeccomp = serde_json::from_str(&text).unwrap();
        let err = compile(&s).unwrap_err().to_string();
        assert!(
            err.contains("linux.seccomp.syscalls")
                && err.contains("at most 4096")
                && err.contains("drop argument conditions"),
            "{err}"
        );
    }
}

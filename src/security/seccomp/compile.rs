//! Policy → BPF. Pure: no syscalls, allocation allowed (this runs in the parent, before clone).
//!
//! # Why several filters
//!
//! seccompiler 0.5 gives a filter ONE match action and ONE mismatch action. A policy that
//! answers EPERM to some calls, ENOSYS to others and kills on a third set therefore becomes one
//! filter per action (mismatch action: ALLOW), plus the hand-written architecture guard below.
//!
//! # How the kernel combines them (kernel/seccomp.c, `seccomp_run_filters`)
//!
//! Every installed filter runs on every syscall, newest first. The result kept is the one whose
//! action ranks highest: KILL_PROCESS > KILL_THREAD > TRAP > ERRNO > USER_NOTIF > TRACE > LOG >
//! ALLOW (the comparison is on `ret & SECCOMP_RET_ACTION_FULL` as a signed 32-bit value, smaller
//! wins). On a tie of action the NEWEST filter's result (with its data, e.g. its errno) wins.
//! So "allow" from one filter never overrides "deny" from another, whatever the order, and the
//! only order-sensitive case, two ERRNO filters both matching one call with different errno
//! values, cannot happen: validation refuses a syscall named under two different actions.
//! The filters are still installed in a fixed, documented order, most severe first (guard,
//! kill, trap, errno…, log), so that if installing fails half-way the strongest parts are in.
//!
//! # What seccompiler emits (read from seccompiler-0.5.0/src/backend)
//!
//! * Every program starts with `ld arch; jeq AUDIT_ARCH_X86_64; ret KILL_PROCESS`: a call made
//!   through another ABI (i386 `int 0x80` arrives as AUDIT_ARCH_I386) is killed. The guard
//!   below does the same so the policy does not depend on that detail.
//! * It does NOT look at the x32 bit: an x32 call arrives as AUDIT_ARCH_X86_64 with
//!   `nr | 0x4000_0000`, so a rule on `ioctl` (16) would miss the x32 `ioctl` (0x4000_0202).
//!   The guard kills every such number.
//! * `Dword` conditions load only the low half of the argument (`args[i]` at offset
//!   16 + 8i); `Qword` conditions compare the high half too. `width = 32` maps to `Dword`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::SeccompError;
use super::policy::{Action, Condition, OpName, Policy};

// Classic BPF opcodes, from include/uapi/linux/bpf_common.h.
/// `BPF_LD (0x00) | BPF_W (0x00) | BPF_ABS (0x20)`.
pub(super) const BPF_LD_W_ABS: u16 = 0x20;
pub(super) const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
pub(super) const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
pub(super) const BPF_RET_K: u16 = 0x06;

/// Offsets into `struct seccomp_data` (include/uapi/linux/seccomp.h):
/// `{ int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }`.
pub(super) const DATA_NR: u32 = 0;
pub(super) const DATA_ARCH: u32 = 4;

/// include/uapi/linux/audit.h: `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
pub(super) const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;

/// arch/x86/include/uapi/asm/unistd.h: `__X32_SYSCALL_BIT`.
pub(super) const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The architecture guard, always the first filter installed (jump targets shown as absolute
/// instruction indices):
///
/// ```text
/// 0: ld  [4]                         ; seccomp_data.arch
/// 1: jeq #AUDIT_ARCH_X86_64, 3, 2    ; native ABI? go on : kill (i386 int 0x80, ...)
/// 2: ret #KILL_PROCESS
/// 3: ld  [0]                         ; seccomp_data.nr
/// 4: jge #0x40000000, 5, 7           ; x32 bit set?
/// 5: jge #0x80000000, 7, 6           ; negative nr (e.g. syscall(-1)): not x32, allowed
/// 6: ret #KILL_PROCESS               ; x32 call: 0x40000000..=0x7fffffff
/// 7: ret #ALLOW                      ; the other filters decide
/// ```
///
/// Negative numbers are left alone: the kernel answers them with ENOSYS (its x32 dispatch
/// computes `nr - 0x40000000` as unsigned and finds it out of range), so they reach no table.
pub(super) fn arch_guard() -> BpfProgram {
    vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
        jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 2),
        jump(BPF_JMP_JGE_K, 0x8000_0000, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Compiles a checked policy into the programs to install, in installation order.
pub(super) fn compile(policy: &Policy) -> Result<Vec<BpfProgram>, SeccompError> {
    let mut programs = vec![arch_guard()];
    for (action, syscalls) in &policy.groups {
        let rules = syscalls
            .iter()
            .map(|(nr, alternatives)| {
                let rules = alternatives
                    .iter()
                    .map(|conds| {
                        let conds = conds.iter().map(condition).collect::<Result<_, _>>()?;
                        SeccompRule::new(conds)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((i64::from(*nr), rules))
            })
            .collect::<Result<BTreeMap<_, _>, seccompiler::BackendError>>()
            .and_then(|rules| {
                SeccompFilter::new(
                    rules,
                    SeccompAction::Allow,
                    seccomp_action(*action),
                    TargetArch::x86_64,
                )
            })
            .and_then(BpfProgram::try_from)
            .map_err(|source| SeccompError::Compile {
                policy: policy.name.clone(),
                action: action.label(),
                source,
            })?;
        programs.push(rules);
    }
    Ok(programs)
}

fn seccomp_action(a: Action) -> SeccompAction {
    match a {
        Action::KillProcess => SeccompAction::KillProcess,
        Action::Trap => SeccompAction::Trap,
        // errno values from libc are small positive numbers; the kernel keeps 16 bits of data.
        Action::Errno(e) => SeccompAction::Errno(e.unsigned_abs()),
        Action::Log => SeccompAction::Log,
    }
}

fn condition(c: &Condition) -> Result<SeccompCondition, seccompiler::BackendError> {
    let len = if c.wide {
        SeccompCmpArgLen::Qword
    } else {
        SeccompCmpArgLen::Dword
    };
    let op = match c.op {
        OpName::Eq => SeccompCmpOp::Eq,
        OpName::Ne => SeccompCmpOp::Ne,
        OpName::Lt => SeccompCmpOp::Lt,
        OpName::Le => SeccompCmpOp::Le,
        OpName::Gt => SeccompCmpOp::Gt,
        OpName::Ge => SeccompCmpOp::Ge,
        OpName::MaskedEq => SeccompCmpOp::MaskedEq(c.mask),
    };
    SeccompCondition::new(c.index, len, op, c.value)
}

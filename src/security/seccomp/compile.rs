//! Policy → ONE BPF program. Pure: no syscalls, allocation allowed (this runs in the parent
//! before clone for a user policy, and in the build script for the built-in ones).
//!
//! # The program
//!
//! ```text
//! guard:     ld arch; jeq AUDIT_ARCH_X86_64 or ret KILL_PROCESS        (i386 int 0x80, ...)
//!            ld nr;   0x40000000 <= nr < 0x80000000 → ret KILL_PROCESS (x32)
//! dispatch:  a binary search over spans of syscall numbers that answer alike (a number
//!            the policy names, or a run of consecutive ones with the same chain, or the
//!            numbers between them: ret ALLOW), on `jge` (a few scattered numbers compared
//!            one by one on `jeq`), through a `ja` only where a conditional jump's 8-bit
//!            offset does not reach
//! chains:    one per named syscall, inline where the search finds its number:
//!            `ret ACTION` when the entry has no `args`, otherwise
//!            seccompiler's rule chain for that one syscall (the arguments, then ret ACTION,
//!            or ret ALLOW when no rule matched)
//! ```
//!
//! A peephole pass ([`optimize`]) then removes what seccompiler's chains carry for their own
//! layout (jumps to jumps, a `ret` per rule, repeated loads, the repeated `jeq nr`): the
//! default program went from 515 to 228 instructions, and its install (the kernel converts
//! and JIT-compiles every instruction) from about 140-200 to about 100 µs. (The policy has
//! grown since: 326 instructions with a search over single numbers, 300 over spans.)
//!
//! # Why one program, and why it decides like the stacked filters it replaces
//!
//! seccompiler 0.5 gives a filter ONE match action, so a policy with EPERM, ENOSYS and kill
//! rules used to become one filter per action plus the guard, all installed. The kernel runs
//! every installed filter on every syscall and keeps the result whose action ranks highest
//! (kernel/seccomp.c `seccomp_run_filters`: KILL_PROCESS > KILL_THREAD > TRAP > ERRNO >
//! USER_NOTIF > TRACE > LOG > ALLOW; on a tie the newest filter's data wins). Each installed
//! filter also costs a JIT compilation and, under the signal lock, an emulation of the filter
//! for every syscall number (the kernel's constant-ALLOW cache); a linear chain of ~70
//! syscalls made that emulation the most expensive step of the payload's start.
//!
//! One program gives the same answer for every call:
//! * The guard comes first and returns KILL_PROCESS for a foreign architecture or an x32
//!   number before anything else runs; in the stacked form its KILL outranked every other
//!   filter's answer, so the verdict is the same.
//! * Validation ([`super::policy`]) refuses a syscall named under two different actions, so
//!   within one policy a native call reaches at most one chain: exactly the one filter of the
//!   stacked form that could answer anything but ALLOW. Its answer (ACTION, or ALLOW when its
//!   argument rules do not match) is the verdict, as it was.
//! * Layers ([`compile_layered`]: the rlimit backend's memory-watch and CPU-pin rules added to
//!   the policy) may name the same syscall: its chains run newest layer first, each falling
//!   through to the next where its rules do not match, so the first match answers. That is
//!   the stack's answer because no older layer's action may outrank a newer one's on that
//!   syscall (checked: `SeccompError::LayerOrder`), and on equal actions the kernel keeps the
//!   newest filter's answer too.
//! * Negative numbers (`syscall(-1)`) pass the guard, match no chain, and get ALLOW; the
//!   kernel answers them with ENOSYS (its x32 dispatch computes `nr - 0x40000000` as unsigned
//!   and finds it out of range), so they reach no table.
//!
//! Unit tests compare these programs with the stacked filters on every syscall number and on
//! argument values around every rule (`single_program_decides_like_the_stacked_filters`,
//! `layered_programs_decide_like_the_stacked_filters`).
//!
//! # What seccompiler emits (read from seccompiler-0.5.0/src/backend)
//!
//! * Every program starts with `ld arch; jeq AUDIT_ARCH_X86_64; ret KILL_PROCESS; ld nr`.
//!   [`chain`] checks those four instructions and drops them (the guard does the same), and
//!   keeps the rest: `jeq nr` (always true where the dispatch lands), the rules, `ret ALLOW`.
//!   Its jumps are relative and stay inside the chain, so the chain can sit anywhere.
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

/// `BPF_JMP (0x05) | BPF_JA (0x00)`: unconditional jump by a 32-bit offset.
pub(super) const BPF_JMP_JA: u16 = 0x05;

/// include/uapi/linux/bpf_common.h `BPF_MAXINSNS`: the kernel refuses longer programs.
const BPF_MAXINSNS: usize = 4096;

/// The architecture guard (jump targets shown as absolute instruction indices); the
/// dispatch starts at 7 with the syscall number in the accumulator:
///
/// ```text
/// 0: ld  [4]                         ; seccomp_data.arch
/// 1: jeq #AUDIT_ARCH_X86_64, 3, 2    ; native ABI? go on : kill (i386 int 0x80, ...)
/// 2: ret #KILL_PROCESS
/// 3: ld  [0]                         ; seccomp_data.nr
/// 4: jge #0x40000000, 5, 7           ; x32 bit set?
/// 5: jge #0x80000000, 7, 6           ; negative nr (e.g. syscall(-1)): not x32, go on
/// 6: ret #KILL_PROCESS               ; x32 call: 0x40000000..=0x7fffffff
/// ```
pub(super) fn arch_guard() -> BpfProgram {
    vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
        jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 2),
        jump(BPF_JMP_JGE_K, 0x8000_0000, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
    ]
}

/// Compiles a checked policy into the one program to install (see the module doc).
pub(super) fn compile(policy: &Policy) -> Result<BpfProgram, SeccompError> {
    compile_layered(&[policy])
}

/// Compiles policies that would otherwise be installed as stacked filters, `layers[0]`
/// installed last (the newest), into ONE program that decides every call as the kernel would
/// decide under the stack. A syscall that several layers name gets their chains one after
/// the other, newest first: where a chain's rules do not match (its `ret ALLOW`), the next
/// layer's chain runs instead. That is the stack's answer only if a newer layer's action
/// never ranks below an older one's on the same syscall (the kernel keeps the highest-ranked
/// action, and on a tie the newest filter's data), which this checks: otherwise an error.
/// Each filter installed costs a JIT compilation and the kernel's per-syscall cache
/// emulation, about 50 µs even for a one-instruction program here: the rlimit backend's
/// extra filters (memory watch, CPU pin) go into the policy's program instead.
pub(super) fn compile_layered(layers: &[&Policy]) -> Result<BpfProgram, SeccompError> {
    let too_large = |len: usize| SeccompError::Compile {
        policy: layers
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        action: "all".into(),
        source: seccompiler::BackendError::FilterTooLarge(len),
    };
    let assembled = assemble(layers)?;
    // The pass shortens the default program about 2.3 times; a program this far over the
    // kernel's limit is refused before it spends time on it.
    if assembled.len() > 16 * BPF_MAXINSNS {
        return Err(too_large(assembled.len()));
    }
    let program = optimize(&assembled);
    if program.len() > BPF_MAXINSNS {
        return Err(too_large(program.len()));
    }
    Ok(program)
}

/// [`compile_layered`]'s program before the peephole pass ([`optimize`]).
pub(super) fn assemble(layers: &[&Policy]) -> Result<BpfProgram, SeccompError> {
    let name = layers
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join("+");
    // Each syscall's chains, newest layer first.
    let mut by_nr: BTreeMap<u32, Vec<(Action, BpfProgram)>> = BTreeMap::new();
    for policy in layers {
        for (action, syscalls) in &policy.groups {
            for (nr, alternatives) in syscalls {
                let body = chain(policy, *action, *nr, alternatives)?;
                by_nr.entry(*nr).or_default().push((*action, body));
            }
        }
    }
    let mut chains: Vec<(u32, BpfProgram)> = Vec::new();
    for (nr, layered) in by_nr {
        for (i, (newer, _)) in layered.iter().enumerate() {
            if let Some((older, _)) = layered[i + 1..]
                .iter()
                .find(|(o, _)| rank(*o) > rank(*newer))
            {
                return Err(SeccompError::LayerOrder {
                    layers: name,
                    nr,
                    newer: newer.label(),
                    older: older.label(),
                });
            }
        }
        chains.push((nr, concat(layered)));
    }

    let mut program = arch_guard();
    program.extend(dispatch(&chains));
    Ok(program)
}

/// The kernel's precedence of a filter's answers (kernel/seccomp.c: KILL_PROCESS >
/// KILL_THREAD > TRAP > ERRNO > USER_NOTIF > TRACE > LOG > ALLOW), for the actions a policy
/// can name.
fn rank(a: Action) -> u8 {
    match a {
        Action::KillProcess => 4,
        Action::Trap => 3,
        Action::Errno(_) => 2,
        Action::UserNotif => 1,
        Action::Log => 0,
    }
}

/// One syscall's chains, newest first, as one: each chain's `ret ALLOW` (none of its rules
/// matched) becomes a jump to the next chain, which reloads the syscall number first (the
/// rules left an argument in the accumulator). A chain that is a bare `ret ACTION` always
/// answers, so nothing after it is kept. Jumps inside a chain stay inside it and keep their
/// offsets: each instruction is replaced by one.
fn concat(layered: Vec<(Action, BpfProgram)>) -> BpfProgram {
    let last = layered.len() - 1;
    let mut out: BpfProgram = Vec::new();
    for (k, (_, body)) in layered.into_iter().enumerate() {
        if k > 0 {
            out.push(stmt(BPF_LD_W_ABS, DATA_NR));
        }
        if k == last || body.len() == 1 {
            out.extend(body);
            break;
        }
        let next = out.len() + body.len();
        for i in body {
            if i.code == BPF_RET_K && i.k == libc::SECCOMP_RET_ALLOW {
                let at = out.len();
                out.push(stmt(BPF_JMP_JA, offset(next - at - 1)));
            } else {
                out.push(i);
            }
        }
    }
    out
}

/// The binary search over `chains` (sorted by number), entered with the syscall number in
/// the accumulator, each chain inline where the search finds its number (see
/// [`dispatch_or`]). Every path ends in a `ret` (a number it does not name: `ret ALLOW`), and
/// every jump stays inside the code returned and points forward, so it can sit anywhere.
fn dispatch(chains: &[(u32, BpfProgram)]) -> BpfProgram {
    dispatch_or(chains, libc::SECCOMP_RET_ALLOW)
}

/// [`dispatch`], with `miss` (a `ret` value) for a number that no chain names. The OCI
/// compiler's programs answer those with the profile's default action.
///
/// The search is over spans of numbers that answer alike: consecutive numbers whose chains
/// are the same instructions (a run of allowed syscalls in an allow-list, of refused ones in
/// a deny-list) form one span, as do the numbers between two named ones (`miss`); a span's
/// chain is reached once the search has narrowed the number to it, with no comparison on the
/// number itself. An allow-list of 345 syscalls is about 60 spans, not 345 leaves.
pub(super) fn dispatch_or(chains: &[(u32, BpfProgram)], miss: u32) -> BpfProgram {
    let miss_body = vec![stmt(BPF_RET_K, miss)];
    // (first number, chain): each span runs up to the next one's first number.
    let mut spans: Vec<(u32, &BpfProgram)> = Vec::new();
    fn push<'a>(spans: &mut Vec<(u32, &'a BpfProgram)>, from: u32, body: &'a BpfProgram) {
        if spans.last().is_none_or(|(_, last)| *last != body) {
            spans.push((from, body));
        }
    }
    let mut next: u64 = 0;
    for (nr, body) in chains {
        if u64::from(*nr) > next {
            push(&mut spans, next as u32, &miss_body);
        }
        push(&mut spans, *nr, body);
        next = u64::from(*nr) + 1;
    }
    if next <= u64::from(u32::MAX) {
        push(&mut spans, next as u32, &miss_body);
    }
    search(&spans, 1 << 32, &miss_body)
}

/// Up to this many chains, a search over single numbers among `miss` spans may compare them
/// one by one (see [`one_by_one`]): a longer list would lengthen every path through it.
const LINEAR_LEAF: usize = 3;

/// The binary search over `spans` (sorted, each running up to the next, the last up to
/// `end`), entered with the syscall number in the accumulator, known to be at least the first
/// span's first number and below `end`: `jge k` skips the lower half when the number is at
/// least the upper half's first; a single span is its chain. Up to [`LINEAR_LEAF`] single
/// numbers among `miss` spans (a deny-list's scattered syscalls) are compared one by one
/// instead, when that is shorter. A jump that cannot reach in the 8-bit offset of a
/// conditional jump goes through a `ja`.
fn search(spans: &[(u32, &BpfProgram)], end: u64, miss: &BpfProgram) -> BpfProgram {
    if let [(_, body)] = spans {
        return (*body).clone();
    }
    let mid = spans.len() / 2;
    let lower = search(&spans[..mid], u64::from(spans[mid].0), miss);
    let mut out = Vec::new();
    match u8::try_from(lower.len()) {
        Ok(skip) => out.push(jump(BPF_JMP_JGE_K, spans[mid].0, skip, 0)),
        Err(_) => {
            out.push(jump(BPF_JMP_JGE_K, spans[mid].0, 0, 1));
            out.push(stmt(BPF_JMP_JA, offset(lower.len())));
        }
    }
    out.extend(lower);
    out.extend(search(&spans[mid..], end, miss));
    match one_by_one(spans, end, miss) {
        Some(linear) if linear.len() < out.len() => linear,
        _ => out,
    }
}

/// `spans` as a list of `jeq NR` each followed by its chain, and `miss` at the end: when
/// every span but the `miss` ones is one number wide, and there are at most [`LINEAR_LEAF`].
fn one_by_one(spans: &[(u32, &BpfProgram)], end: u64, miss: &BpfProgram) -> Option<BpfProgram> {
    let chains = spans.iter().filter(|(_, body)| *body != miss).count();
    if chains > LINEAR_LEAF {
        return None;
    }
    let mut out = Vec::new();
    for (i, (nr, body)) in spans.iter().enumerate() {
        if *body == miss {
            continue;
        }
        let next = spans.get(i + 1).map_or(end, |s| u64::from(s.0));
        if next != u64::from(*nr) + 1 {
            return None;
        }
        match u8::try_from(body.len()) {
            Ok(skip) => out.push(jump(BPF_JMP_JEQ_K, *nr, 0, skip)),
            Err(_) => {
                out.push(jump(BPF_JMP_JEQ_K, *nr, 1, 0));
                out.push(stmt(BPF_JMP_JA, offset(body.len())));
            }
        }
        out.extend(body.iter().cloned());
    }
    out.extend(miss.iter().cloned());
    Some(out)
}

/// A `ja` offset; assembled programs are at most 16 times [`BPF_MAXINSNS`] long (checked
/// before the peephole pass, the kernel's limit after it), so a longer one is a bug of this
/// compiler, which must not produce a program.
fn offset(len: usize) -> u32 {
    u32::try_from(len).expect("a seccomp jump fits in 32 bits")
}

/// What one syscall gets, entered with its number in the accumulator: `ret ACTION` when its
/// entry has no `args`; otherwise seccompiler's chain for it, without seccompiler's own
/// architecture check (see the module doc).
fn chain(
    policy: &Policy,
    action: Action,
    nr: u32,
    alternatives: &[Vec<Condition>],
) -> Result<BpfProgram, SeccompError> {
    let ret = action_ret(action);
    if alternatives.is_empty() {
        return Ok(vec![stmt(BPF_RET_K, ret)]);
    }
    let compile_err = |source| SeccompError::Compile {
        policy: policy.name.clone(),
        action: action.label(),
        source,
    };
    let rules = alternatives
        .iter()
        .map(|conds| {
            let conds = conds.iter().map(condition).collect::<Result<_, _>>()?;
            SeccompRule::new(conds)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(compile_err)?;
    let program = SeccompFilter::new(
        BTreeMap::from([(i64::from(nr), rules)]),
        SeccompAction::Allow,
        seccomp_action(action),
        TargetArch::x86_64,
    )
    .and_then(BpfProgram::try_from)
    .map_err(compile_err)?;
    let layout = |problem| SeccompError::Layout {
        policy: policy.name.clone(),
        problem,
    };
    let prologue = [
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
    ];
    let body = program
        .strip_prefix(&prologue[..])
        .ok_or_else(|| layout("it does not start with the architecture check and `ld nr`"))?;
    match (body.first(), body.last()) {
        (Some(first), Some(last))
            if first.code == BPF_JMP_JEQ_K
                && first.k == nr
                && last.code == BPF_RET_K
                && last.k == libc::SECCOMP_RET_ALLOW =>
        {
            Ok(body.iter().map(|i| user_notif_ret(action, i)).collect())
        }
        _ => Err(layout(
            "the chain does not start with `jeq nr` or does not end with `ret ALLOW`",
        )),
    }
}

/// What an instruction does next, with absolute targets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flow {
    /// `ret`: nothing.
    Ret,
    /// `ja`: always there.
    Ja(usize),
    /// A conditional jump: (taken, not taken).
    Cond(usize, usize),
    /// Anything else: the next instruction.
    Next,
}

/// What the accumulator is known to hold when an instruction runs. The words of
/// `seccomp_data` do not change while a program runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Acc {
    Unknown,
    /// The 32-bit word at this offset of `seccomp_data`.
    Word(u32),
    /// That word, known to equal this value (a `jeq` on it was taken).
    Value(u32, u32),
}

fn join(a: Option<Acc>, b: Acc) -> Acc {
    let word = |x: Acc| match x {
        Acc::Word(w) | Acc::Value(w, _) => Some(w),
        Acc::Unknown => None,
    };
    match a {
        None => b,
        Some(a) if a == b => a,
        // The same word, with different or unknown values: still that word.
        Some(a) => match (word(a), word(b)) {
            (Some(x), Some(y)) if x == y => Acc::Word(x),
            _ => Acc::Unknown,
        },
    }
}

/// A peephole pass over a program of the forms this compiler emits (absolute loads,
/// `and`, `jeq`/`jge`/`jgt`/`jset` against constants, `ja`, `ret`); any other instruction
/// leaves the program as it is. It keeps every path's answer and removes what seccompiler's
/// rule chains carry for its own layout: jumps to jumps (threaded to their end), a `ret` per
/// rule (jumps to a `ret` go to the last equal one in reach), loads of the
/// word the accumulator already holds, a `jeq` whose outcome the path already decided (the
/// chain's repeat of the dispatch's `jeq nr`), and what no path reaches. Every
/// jump of a program points forward; removing instructions only shortens a jump, so each
/// offset still fits. The kernel's install cost grows with the program's length (its
/// conversion and JIT run over every instruction). Compared with the unoptimized programs by
/// the equivalence tests.
pub(super) fn optimize(p: &[sock_filter]) -> BpfProgram {
    let mut prog = p.to_vec();
    if prog.is_empty() {
        return prog;
    }
    for _ in 0..4 {
        match optimize_once(&prog) {
            Some(shorter) if shorter.len() < prog.len() => prog = shorter,
            _ => break,
        }
    }
    prog
}

const BPF_JMP_JGT_K: u16 = 0x05 | 0x20;
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
const BPF_ALU_AND_K: u16 = 0x04 | 0x50;

/// One round of [`optimize`]; `None` when the program has an instruction it does not model
/// or a jump out of range.
fn optimize_once(p: &[sock_filter]) -> Option<BpfProgram> {
    let n = p.len();
    let target = |i: usize, off: u32| {
        i.checked_add(1)?
            .checked_add(off as usize)
            .filter(|&t| t < n)
    };
    let mut flow = Vec::with_capacity(n);
    for (i, ins) in p.iter().enumerate() {
        flow.push(match ins.code {
            BPF_RET_K => Flow::Ret,
            BPF_JMP_JA => Flow::Ja(target(i, ins.k)?),
            BPF_JMP_JEQ_K | BPF_JMP_JGE_K | BPF_JMP_JGT_K | BPF_JMP_JSET_K => {
                Flow::Cond(target(i, u32::from(ins.jt))?, target(i, u32::from(ins.jf))?)
            }
            BPF_LD_W_ABS | BPF_ALU_AND_K if i + 1 < n => Flow::Next,
            _ => return None,
        });
    }
    // Jumps to jumps: to where the last `ja` goes (a conditional only while its offset fits).
    let original = flow.clone();
    let end = |mut t: usize| {
        while let Flow::Ja(u) = original[t] {
            t = u;
        }
        t
    };
    let fits = |i: usize, t: usize| t - i - 1 <= usize::from(u8::MAX);
    // Every `ret K` answers the same: a jump to one goes to the last within its reach, so
    // that the others fall out of use.
    let mut rets: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for i in (0..n).filter(|&i| flow[i] == Flow::Ret) {
        rets.entry(p[i].k).or_default().push(i);
    }
    let last_ret = |t: usize, limit: usize| {
        if original[t] != Flow::Ret {
            return t;
        }
        // The positions of this `ret K`, ascending; `t` is one of them.
        let at = &rets[&p[t].k];
        match at.partition_point(|&j| j <= limit).checked_sub(1) {
            Some(k) if at[k] >= t => at[k],
            _ => t,
        }
    };
    for (i, f) in flow.iter_mut().enumerate() {
        *f = match *f {
            Flow::Ja(t) => Flow::Ja(last_ret(end(t), n - 1)),
            Flow::Cond(t, f) => {
                let reach = i + 1 + usize::from(u8::MAX);
                let (et, ef) = (last_ret(end(t), reach), last_ret(end(f), reach));
                Flow::Cond(
                    if fits(i, et) { et } else { t },
                    if fits(i, ef) { ef } else { f },
                )
            }
            other => other,
        };
    }
    // What the accumulator holds on entry to each instruction (every jump is forward, so one
    // pass in order sees every predecessor first); decided jumps and repeated loads go.
    let mut acc: Vec<Option<Acc>> = vec![None; n];
    acc[0] = Some(Acc::Unknown);
    let mut reached = vec![false; n];
    let mut drop = vec![false; n];
    for i in 0..n {
        let Some(a) = acc[i] else { continue };
        reached[i] = true;
        let ins = &p[i];
        let send = |t: usize, v: Acc, acc: &mut Vec<Option<Acc>>| acc[t] = Some(join(acc[t], v));
        match flow[i] {
            Flow::Ret => {}
            Flow::Ja(t) => send(t, a, &mut acc),
            Flow::Next if ins.code == BPF_LD_W_ABS => {
                if matches!(a, Acc::Word(w) | Acc::Value(w, _) if w == ins.k) {
                    drop[i] = true;
                    send(i + 1, a, &mut acc);
                } else {
                    send(i + 1, Acc::Word(ins.k), &mut acc);
                }
            }
            Flow::Next => send(i + 1, Acc::Unknown, &mut acc),
            Flow::Cond(t, f) => {
                let decided = match (a, ins.code) {
                    (Acc::Value(_, v), BPF_JMP_JEQ_K) => Some(v == ins.k),
                    _ => None,
                };
                match decided {
                    Some(taken) => {
                        let to = if taken { t } else { f };
                        flow[i] = Flow::Ja(to);
                        send(to, a, &mut acc);
                    }
                    None => {
                        let on_true = match (a, ins.code) {
                            (Acc::Word(w), BPF_JMP_JEQ_K) => Acc::Value(w, ins.k),
                            _ => a,
                        };
                        send(t, on_true, &mut acc);
                        send(f, a, &mut acc);
                    }
                }
            }
        }
    }
    // A `ja` to the next kept instruction is dropped too.
    let kept = |i: usize, reached: &[bool], drop: &[bool]| reached[i] && !drop[i];
    let next_kept = |mut t: usize, reached: &[bool], drop: &[bool]| {
        while t < n && !kept(t, reached, drop) {
            t += 1;
        }
        t
    };
    for i in (0..n).rev() {
        if let Flow::Ja(t) = flow[i]
            && kept(i, &reached, &drop)
            && next_kept(i + 1, &reached, &drop) == next_kept(t, &reached, &drop)
        {
            drop[i] = true;
        }
    }
    let mut new_index = vec![usize::MAX; n + 1];
    let mut count = 0;
    for (i, slot) in new_index.iter_mut().take(n).enumerate() {
        if kept(i, &reached, &drop) {
            *slot = count;
            count += 1;
        }
    }
    let at = |t: usize| new_index.get(next_kept(t, &reached, &drop)).copied();
    let mut out = Vec::with_capacity(count);
    for i in 0..n {
        if !kept(i, &reached, &drop) {
            continue;
        }
        let me = new_index[i];
        let rel = |t: usize| {
            at(t)
                .filter(|&x| x != usize::MAX && x > me)
                .map(|x| x - me - 1)
        };
        let ins = &p[i];
        out.push(match flow[i] {
            Flow::Ja(t) => stmt(BPF_JMP_JA, u32::try_from(rel(t)?).ok()?),
            Flow::Cond(t, f) => jump(
                ins.code,
                ins.k,
                u8::try_from(rel(t)?).ok()?,
                u8::try_from(rel(f)?).ok()?,
            ),
            _ => ins.clone(),
        });
    }
    Some(out)
}

/// The form this compiler replaced, kept as the reference for the equivalence test: the guard
/// (ending in `ret ALLOW`) and one seccompiler filter per action, installed in that order and
/// combined by the kernel's precedence rule.
#[cfg(test)]
pub(super) fn compile_stacked(policy: &Policy) -> Vec<BpfProgram> {
    let mut guard = arch_guard();
    guard.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
    let mut programs = vec![guard];
    for (action, syscalls) in &policy.groups {
        let rules = syscalls
            .iter()
            .map(|(nr, alternatives)| {
                let rules = alternatives
                    .iter()
                    .map(|conds| {
                        SeccompRule::new(conds.iter().map(|c| condition(c).unwrap()).collect())
                            .unwrap()
                    })
                    .collect::<Vec<_>>();
                (i64::from(*nr), rules)
            })
            .collect::<BTreeMap<_, _>>();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            seccomp_action(*action),
            TargetArch::x86_64,
        )
        .unwrap();
        let program = BpfProgram::try_from(filter).unwrap();
        programs.push(program.iter().map(|i| user_notif_ret(*action, i)).collect());
    }
    programs
}

/// seccompiler 0.5 has no USER_NOTIF action: its rule chains for one are built with
/// `Trace(USER_NOTIF_PLACEHOLDER)`, and [`user_notif_ret`] turns that return into
/// `SECCOMP_RET_USER_NOTIF`. No policy can ask for TRACE, so the placeholder is unambiguous.
const USER_NOTIF_PLACEHOLDER: u32 = 0x4e4f;

fn seccomp_action(a: Action) -> SeccompAction {
    match a {
        Action::KillProcess => SeccompAction::KillProcess,
        Action::Trap => SeccompAction::Trap,
        // errno values from libc are small positive numbers; the kernel keeps 16 bits of data.
        Action::Errno(e) => SeccompAction::Errno(e.unsigned_abs()),
        Action::UserNotif => SeccompAction::Trace(USER_NOTIF_PLACEHOLDER),
        Action::Log => SeccompAction::Log,
    }
}

/// What a matching call's `ret` returns.
pub(super) fn action_ret(a: Action) -> u32 {
    match a {
        Action::UserNotif => libc::SECCOMP_RET_USER_NOTIF,
        other => u32::from(seccomp_action(other)),
    }
}

/// `i`, with the placeholder return of a USER_NOTIF chain made `ret USER_NOTIF`.
fn user_notif_ret(a: Action, i: &sock_filter) -> sock_filter {
    let placeholder = u32::from(SeccompAction::Trace(USER_NOTIF_PLACEHOLDER));
    if a == Action::UserNotif && i.code == BPF_RET_K && i.k == placeholder {
        stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF)
    } else {
        i.clone()
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

//! Test-only: a classic-BPF interpreter for seccomp programs, and the kernel's rule for
//! combining several filters, so the compiled policy's decisions can be checked without
//! installing anything. Supports exactly the instructions seccompiler and the guard emit;
//! anything else panics, so a change in what seccompiler emits cannot pass unnoticed.

pub use seccompiler::sock_filter;

/// `struct seccomp_data` as the kernel fills it.
#[derive(Debug, Clone, Copy)]
pub struct Data {
    pub nr: i32,
    pub arch: u32,
    pub args: [u64; 6],
}

impl Data {
    pub fn x86_64(nr: u32, args: &[u64]) -> Data {
        let mut a = [0u64; 6];
        a[..args.len()].copy_from_slice(args);
        Data {
            nr: nr as i32,
            arch: super::compile::AUDIT_ARCH_X86_64,
            args: a,
        }
    }

    fn word(&self, offset: u32) -> u32 {
        match offset {
            0 => self.nr as u32,
            4 => self.arch,
            8 | 12 => 0, // instruction pointer: not used by cordon's filters
            16..=63 if offset.is_multiple_of(4) => {
                let arg = self.args[((offset - 16) / 8) as usize];
                if offset.is_multiple_of(8) {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            _ => panic!("load from offset {offset} outside struct seccomp_data"),
        }
    }
}

/// Runs one program on `data`, returns the 32-bit result.
pub fn run(prog: &[sock_filter], data: &Data) -> u32 {
    exec(prog, data).0
}

/// How many instructions one run of `prog` on `data` executes.
pub fn steps(prog: &[sock_filter], data: &Data) -> usize {
    exec(prog, data).1
}

fn exec(prog: &[sock_filter], data: &Data) -> (u32, usize) {
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    let mut steps = 0;
    loop {
        steps += 1;
        let i = prog
            .get(pc)
            .unwrap_or_else(|| panic!("fell off the program at {pc}"));
        pc += 1;
        match i.code {
            0x20 => acc = data.word(i.k),          // ld [k]
            0x54 => acc &= i.k,                    // and #k
            0x05 => pc += i.k as usize,            // ja
            0x15 => pc += cond(acc == i.k, i),     // jeq #k
            0x25 => pc += cond(acc > i.k, i),      // jgt #k
            0x35 => pc += cond(acc >= i.k, i),     // jge #k
            0x45 => pc += cond(acc & i.k != 0, i), // jset #k
            0x06 => return (i.k, steps),           // ret #k
            other => panic!("unsupported BPF opcode {other:#x} at {}", pc - 1),
        }
    }
}

fn cond(taken: bool, i: &sock_filter) -> usize {
    usize::from(if taken { i.jt } else { i.jf })
}

/// The kernel's combination (kernel/seccomp.c `seccomp_run_filters`): run every filter, newest
/// first; keep the result whose action (`ret & SECCOMP_RET_ACTION_FULL`, as a signed value) is
/// smallest, the first seen (newest) on a tie. `filters` is in installation order.
pub fn run_all(filters: &[Vec<sock_filter>], data: &Data) -> u32 {
    let mut ret = libc::SECCOMP_RET_ALLOW;
    for f in filters.iter().rev() {
        let cur = run(f, data);
        if action_only(cur) < action_only(ret) {
            ret = cur;
        }
    }
    ret
}

fn action_only(ret: u32) -> i32 {
    (ret & libc::SECCOMP_RET_ACTION_FULL) as i32
}

pub fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | e as u32
}

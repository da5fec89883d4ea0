//! cordon-oci's `linux.seccomp` compiler: the program it installs (a binary search on the
//! syscall number into each syscall's rules, then the peephole pass) answers every call as
//! the linear program of the config's rules does (first matching rule in the config's
//! order). Profiles are built from the input: entries naming syscalls (several per entry, the
//! same syscall in several entries), every action, the default action's own (left out, as
//! runc does), argument conditions of every operator, repeated indexes (each condition then a
//! rule of its own), i386 filtered or not; calls on and around the named syscalls (by their
//! x86_64 and i386 numbers), on both architectures and x32 numbers, with argument values on
//! and around the conditions'.
#![no_main]
use cordon::security::seccomp::oci::linear_and_compiled;
use libfuzzer_sys::fuzz_target;

#[path = "shared/seccomp_calls.rs"]
mod seccomp_calls;
use seccomp_calls::{Input, SYSCALLS, same_answers};

/// The i386 numbers of the names of `SYSCALLS`, and a few only i386 has (socketcall, ipc, mmap2).
const I386_NUMBERS: &[u32] = &[3, 4, 90, 125, 54, 359, 120, 37, 136, 172, 310, 357, 102, 117, 192];

const OPS: &[&str] = &[
    "SCMP_CMP_EQ",
    "SCMP_CMP_NE",
    "SCMP_CMP_LT",
    "SCMP_CMP_LE",
    "SCMP_CMP_GT",
    "SCMP_CMP_GE",
    "SCMP_CMP_MASKED_EQ",
];
const ACTIONS: &[&str] = &[
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_TRAP",
    "SCMP_ACT_LOG",
    "SCMP_ACT_TRACE",
];

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let default = input.pick(ACTIONS);
    let mut values = vec![0u64, u64::MAX, 1 << 32, 0xffff_ffff];
    let mut numbers = vec![0u32, 470, 0x4000_0000, 0x4000_0001, u32::MAX];
    let mut entries = Vec::new();
    for _ in 0..1 + input.byte() % 8 {
        let mut names = Vec::new();
        for _ in 0..1 + input.byte() % 3 {
            // Now and then a name the x86_64 table does not know (skipped, as runc does).
            let (name, nr) = match input.byte() % 8 {
                0 => ("no_such_call", u32::MAX),
                _ => input.pick(SYSCALLS),
            };
            names.push(format!("\"{name}\""));
            numbers.extend([nr, nr.wrapping_add(1), nr.wrapping_sub(1)]);
        }
        let mut args = Vec::new();
        for _ in 0..input.byte() % 4 {
            let (value, two) = (input.value(), input.value());
            values.extend([
                value,
                value.wrapping_add(1),
                value.wrapping_sub(1),
                two,
                two & value,
                !value,
            ]);
            args.push(format!(
                r#"{{"index": {}, "value": {value}, "valueTwo": {two}, "op": "{}"}}"#,
                input.byte() % 6,
                input.pick(OPS)
            ));
        }
        entries.push(format!(
            r#"{{"names": [{}], "action": "{}", "errnoRet": {}, "args": [{}]}}"#,
            names.join(","),
            input.pick(ACTIONS),
            input.byte() % 4,
            args.join(",")
        ));
    }
    // Half the profiles filter i386 calls too, by the i386 numbers of the same names.
    let archs = if input.byte() % 2 == 0 {
        numbers.extend(I386_NUMBERS.iter().flat_map(|&n| [n, n + 1, n - 1]));
        r#""architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"], "#
    } else {
        ""
    };
    let json = format!(
        r#"{{{archs}"defaultAction": "{default}", "defaultErrnoRet": {}, "syscalls": [{}]}}"#,
        input.byte() % 4,
        entries.join(",")
    );
    let Ok((linear, compiled)) = linear_and_compiled(&json) else {
        return;
    };
    let what = format!("profile:\n{json}");
    same_answers(&linear, &compiled, numbers, &values, &mut input, &what);
});

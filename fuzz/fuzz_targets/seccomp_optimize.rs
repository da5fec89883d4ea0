//! The seccomp compiler's peephole pass keeps every answer: a policy is built from the input
//! (syscalls, actions, argument conditions of every operator and width, alone or layered over
//! the default policy), and its program before and after the pass must give the same result
//! for calls drawn from the input: syscall numbers on and around the policy's, on both
//! architectures the guard tells apart, with argument values on, around and between the
//! conditions' values.
#![no_main]
use cordon::security::seccomp::unoptimized_and_optimized;
use libfuzzer_sys::fuzz_target;

#[path = "shared/seccomp_calls.rs"]
mod seccomp_calls;
use seccomp_calls::{Input, SYSCALLS, same_answers};

const OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge", "masked_eq"];
const ACTIONS: &[&str] = &["errno", "trap", "kill_process", "log"];

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let over_default = input.byte() % 2 == 1;
    let mut text = String::from("name = \"fuzz\"\n");
    let mut values = vec![0u64, u64::MAX, 1 << 32, 0xffff_ffff];
    let mut numbers = vec![0u32, 400, 0x4000_0000, u32::MAX];
    for _ in 0..1 + input.byte() % 6 {
        let (name, nr) = input.pick(SYSCALLS);
        numbers.extend([nr, nr.wrapping_add(1), nr.wrapping_sub(1)]);
        text.push_str(&format!(
            "[[deny]]\nsyscall = \"{name}\"\nwhy = \"fuzz\"\naction = \"{}\"\nargs = [",
            input.pick(ACTIONS)
        ));
        for _ in 0..input.byte() % 4 {
            let width = if input.byte() % 2 == 0 { 32 } else { 64 };
            let fits = if width == 32 { 0xffff_ffff } else { u64::MAX };
            let op = input.pick(OPS);
            let mut value = input.value() & fits;
            let mask = (op == "masked_eq").then(|| (input.value() & fits).max(1));
            if let Some(m) = mask {
                value &= m;
                values.extend([m, !m]);
            }
            values.extend([
                value,
                value.wrapping_add(1),
                value.wrapping_sub(1),
                value | 1 << 32,
            ]);
            text.push_str(&format!(
                "{{ index = {}, width = {width}, op = \"{op}\", value = {value}{} }}, ",
                input.byte() % 6,
                mask.map(|m| format!(", mask = {m}")).unwrap_or_default()
            ));
        }
        text.push_str("]\n");
    }
    let Ok((plain, optimized)) = unoptimized_and_optimized(&text, over_default) else {
        return;
    };
    assert!(
        optimized.len() <= plain.len(),
        "the pass lengthened:\n{text}"
    );
    let what = format!("policy (over the default policy: {over_default}):\n{text}");
    same_answers(&plain, &optimized, numbers, &values, &mut input, &what);
});

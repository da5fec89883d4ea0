//! What the seccomp fuzz targets share: reading the input as numbers, and comparing two
//! programs on calls drawn from it.
use cordon::security::seccomp::bpf_eval::{Data, run, sock_filter};

/// Syscalls the default policy has rules for (with and without argument conditions), and some
/// it allows; (name, x86_64 number).
pub const SYSCALLS: &[(&str, u32)] = &[
    ("read", 0),
    ("write", 1),
    ("mmap", 9),
    ("mprotect", 10),
    ("ioctl", 16),
    ("socket", 41),
    ("clone", 56),
    ("kill", 62),
    ("personality", 135),
    ("prctl", 157),
    ("unshare", 272),
    ("bpf", 321),
];

pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;

/// Reads the input as a stream of numbers; zeros once it runs out.
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    pub fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::from(self.byte()) % from.len()]
    }
    /// Mostly small or round numbers, where the comparisons' edges are.
    pub fn value(&mut self) -> u64 {
        match self.byte() % 4 {
            0 => u64::from(self.byte()),
            1 => 1u64 << (self.byte() % 64),
            2 => u64::MAX - u64::from(self.byte()),
            _ => (0..8).fold(0, |v, _| v << 8 | u64::from(self.byte())),
        }
    }
}

/// `want` and `got` must answer alike for every number of `numbers`, on both architectures,
/// with 8 argument vectors each, drawn from `values` by the rest of the input (and still
/// varied once it runs out). `what` says what was compiled, for the failure.
pub fn same_answers(
    want: &[sock_filter],
    got: &[sock_filter],
    mut numbers: Vec<u32>,
    values: &[u64],
    input: &mut Input,
    what: &str,
) {
    numbers.sort_unstable();
    numbers.dedup();
    for &nr in &numbers {
        for arch in [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386] {
            for j in 0..8 {
                let args = [0, 1, 2, 3, 4, 5]
                    .map(|k| values[(usize::from(input.byte()) + j * 6 + k) % values.len()]);
                let d = Data {
                    nr: nr as i32,
                    arch,
                    args,
                };
                assert_eq!(run(got, &d), run(want, &d), "{what}\ncall: {d:?}");
            }
        }
    }
}

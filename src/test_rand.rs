//! Test-only: a small deterministic pseudo-random source (xorshift64), for tests that draw
//! many inputs and must draw the same ones on every run.

/// `rand(n)`: the next number in `0..n`, from `seed`'s sequence.
pub fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    }
}

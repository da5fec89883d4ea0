//! The only module with `unsafe`: thin wrappers over syscalls that nix and libc's safe
//! surface do not cover. Each block has a `// SAFETY:` comment and turns into a `Result` at once.
pub mod seccomp_probe;

//! The security layers applied to the payload just before `execve`, in this order:
//! capabilities dropped ([`caps`]), Landlock ([`landlock`]), then seccomp ([`seccomp`]) last,
//! since a seccomp filter would block the steps before it.

pub mod caps;
pub mod landlock;
pub mod seccomp;

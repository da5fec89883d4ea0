//! `cordon doctor`: which mechanisms this host offers, and the fix for each missing one.
//! Also the hints that launcher errors carry.

use nix::errno::Errno;

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The likely cause and fix when creating the sandbox's namespaces fails with `errno`.
pub fn userns_hint(errno: Errno) -> String {
    let mut causes = Vec::new();
    if read_trim("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        causes.push("kernel.unprivileged_userns_clone=0; run `sysctl -w kernel.unprivileged_userns_clone=1` or run as root".to_string());
    }
    if read_trim("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        causes.push("user.max_user_namespaces=0; run `sysctl -w user.max_user_namespaces=15000`".to_string());
    }
    if read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        causes.push("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1); add an AppArmor profile granting `userns` to cordon, or run `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`".to_string());
    }
    if errno == Errno::ENOSPC {
        causes.push("the per-user namespace count is exhausted (user.max_user_namespaces or max_pid_namespaces); raise it with sysctl".to_string());
    }
    if errno == Errno::EINVAL {
        causes.push("the process is multi-threaded or the kernel lacks a namespace type (CONFIG_USER_NS, CONFIG_PID_NS, CONFIG_NET_NS)".to_string());
    }
    if causes.is_empty() {
        "; run `cordon doctor` to see which mechanism the host blocks".to_string()
    } else {
        format!("; {}", causes.join("; "))
    }
}

/// Entry point of `cordon doctor`; returns the exit code.
pub fn main(_json: bool) -> i32 {
    eprintln!("cordon doctor: not written yet");
    1
}

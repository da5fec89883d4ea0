//! `process.apparmorProfile`: the AppArmor profile a container's process enters at its
//! execve, applied as runc applies it: `exec PROFILE` written to the process's own
//! `attr/apparmor/exec` file (`attr/exec` before Linux 5.8), before no_new_privs and the
//! seccomp filter. containerd's CRI plugin and podman put a profile in every container's
//! config on a host with AppArmor enabled.

use std::io::Write;

/// Whether AppArmor is enabled (the kernel has it and it was not turned off at boot).
const ENABLED: &str = "/sys/module/apparmor/parameters/enabled";

fn enabled() -> bool {
    std::fs::read_to_string(ENABLED).is_ok_and(|s| s.trim() == "Y")
}

/// The profile the process must enter, checked on the host before the container is made (or
/// exec'd into): `None` when there is none to enter. A profile asked for on a host without
/// AppArmor is an error, never dropped; `unconfined` there is what every process already
/// runs as.
pub fn to_apply(profile: Option<&str>) -> Result<Option<String>, String> {
    to_apply_with(profile, enabled())
}

fn to_apply_with(profile: Option<&str>, enabled: bool) -> Result<Option<String>, String> {
    match profile {
        None => Ok(None),
        Some(p) if enabled => Ok(Some(p.to_string())),
        Some("unconfined") => Ok(None),
        Some(p) => Err(format!(
            "`process.apparmorProfile` asks for the AppArmor profile {p:?}, but AppArmor is not \
             enabled on this host ({ENABLED} is not Y): boot with AppArmor enabled (and the \
             profile loaded), or remove the field"
        )),
    }
}

/// What to do when the container's /proc is not a plain procfs.
const FIX: &str = "mount a `proc` file system at /proc in config.json's `mounts` and mount \
                   nothing below it (a mount or symlink there could take the write that confines \
                   the process)";

/// Makes the calling process's next execve enter `profile`, through `proc`, the container's
/// procfs (checked as such by the caller): the file is opened below it with no symlink
/// followed and no mount crossed, as runc checks since CVE-2019-16884, so that a file or
/// mount the image or the container put at /proc cannot take the write while the process
/// runs unconfined. The process must be single-threaded (its pid is its thread's id).
pub fn change_onexec(proc: &std::os::fd::OwnedFd, profile: &str) -> Result<(), String> {
    use nix::errno::Errno;
    let data = format!("exec {profile}");
    let pid = std::process::id();
    let paths = [
        format!("{pid}/attr/apparmor/exec"),
        format!("{pid}/attr/exec"),
    ];
    for (i, rel) in paths.iter().enumerate() {
        let fd = super::init::write_below_proc(proc, rel);
        let fd = match fd {
            Ok(fd) => fd,
            Err(Errno::ENOENT) if i == 0 => continue,
            Err(e @ (Errno::EXDEV | Errno::ELOOP)) => {
                return Err(format!(
                    "open /proc/{rel}: {e}: a mount or a symlink is in the way in the container's \
                     procfs, where the file must be opened with none: {FIX}"
                ));
            }
            Err(e) => {
                return Err(format!(
                    "open /proc/{rel}: {e} (in the container's procfs, with no symlink or mount \
                     on the way): {FIX}"
                ));
            }
        };
        let on_proc = nix::sys::statfs::fstatfs(&fd)
            .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
        if !on_proc {
            return Err(format!(
                "/proc/{rel} is not a file of the procfs (another file system is mounted over \
                 it): {FIX}"
            ));
        }
        let mut f = std::fs::File::from(fd);
        // One write: the kernel parses the whole command from it.
        return match f.write(data.as_bytes()) {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => Err(format!(
                "write {data:?} to /proc/{rel}: only {n} bytes written"
            )),
            Err(e) => Err(format!(
                "write {data:?} to /proc/{rel}: {e} (is the profile loaded? `aa-status` lists the loaded profiles)"
            )),
        };
    }
    unreachable!("the loop returns on its last path")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_is_applied_only_where_apparmor_is_enabled() {
        assert_eq!(to_apply_with(None, true), Ok(None));
        assert_eq!(to_apply_with(Some("p"), true), Ok(Some("p".into())));
        assert_eq!(
            to_apply_with(Some("unconfined"), true),
            Ok(Some("unconfined".into()))
        );
        assert_eq!(to_apply_with(Some("unconfined"), false), Ok(None));
        let e = to_apply_with(Some("cri-containerd.apparmor.d"), false).unwrap_err();
        assert!(
            e.contains("process.apparmorProfile")
                && e.contains("cri-containerd.apparmor.d")
                && e.contains("not enabled"),
            "{e}"
        );
    }
}

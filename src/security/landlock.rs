//! Landlock for the payload: read+execute on the whole root, read+write on /workspace, /tmp
//! and /dev/shm, read+write on the few device files programs write to, no TCP bind or
//! connect, and (ABI 6+) abstract unix sockets and signals scoped to the sandbox.
//!
//! Landlock comes after every mount (it would not stop them, but paths must be final) and
//! before seccomp. "Not enforced" is an error unless the caller accepted the downgrade.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The first Landlock ABI that restricts TCP (bind and connect by port).
pub const NET_ABI: i32 = 4;

/// What TCP the payload may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetAccess {
    /// No TCP bind or connect at all (`--net none`).
    Deny,
    /// TCP connect to this port only (the proxy's, `--net allow=`); no bind.
    ProxyOnly(u16),
    /// TCP is not restricted by Landlock (`--net host`).
    Unrestricted,
}

/// The ABI cordon's ruleset is written for. Newer kernels enforce all of it; older ones
/// enforce the part they know (reported as "partial"; the namespaces cover the rest: the
/// network namespace has no route out, the pid namespace hides other processes).
pub const TARGET_ABI: ABI = ABI::V6;

/// Directories the payload may write.
pub const WRITABLE_DIRS: &[&str] = &["/workspace", "/tmp", "/dev/shm"];
/// Device files the payload may read and write (not create or execute).
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
];

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error(
        "Landlock is not enforced on this kernel ({0}); cordon refuses to run without it. \
         Enable it (boot with `lsm=...,landlock`, kernel 5.13+), or pass `--allow-degraded landlock` \
         to run without it (the result will say so)"
    )]
    NotEnforced(String),
    #[error("cannot set up Landlock: {0}")]
    Setup(String),
    #[error(
        "Landlock on this kernel (ABI {0}) cannot restrict TCP connections (ABI 4, Linux 6.7, is needed), so `--net allow=` cannot confine the program to cordon's proxy; cordon refuses to run. Use a newer kernel, `--net none`, or pass `--allow-degraded landlock` to rely on the network namespace alone (the result will say so)"
    )]
    NoNetRule(i32),
}

/// What was enforced, for the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockReport {
    /// "enforced", "partial (kernel ABI N)", or "disabled (...)".
    pub status: String,
    pub abi: Option<u32>,
}

/// Restricts the calling thread. `allow_degraded`: a kernel without Landlock is reported
/// instead of refused.
/// `extra_writable`: further directories the payload may write (a dependency install target).
pub fn restrict(
    allow_degraded: bool,
    net: NetAccess,
    extra_writable: &[&str],
) -> Result<LandlockReport, LandlockError> {
    let setup = |e: &dyn std::fmt::Display| LandlockError::Setup(e.to_string());
    let abi = TARGET_ABI;
    if let NetAccess::ProxyOnly(_) = net {
        // Fail closed: best-effort compatibility would silently drop the TCP rule.
        let kernel = crate::sys::landlock_abi().unwrap_or(0);
        if kernel < NET_ABI && !allow_degraded {
            return Err(LandlockError::NoNetRule(kernel));
        }
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| setup(&e))?;
    if net != NetAccess::Unrestricted {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| setup(&e))?;
    }
    let mut ruleset = ruleset
        .scope(Scope::from_all(abi))
        .map_err(|e| setup(&e))?
        .create()
        .map_err(|e| setup(&e))?;
    if let NetAccess::ProxyOnly(port) = net {
        ruleset = ruleset
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| setup(&e))?;
    }
    let dev_access =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut rules: Vec<(&str, landlock::BitFlags<AccessFs>)> =
        vec![("/", AccessFs::from_read(abi))];
    rules.extend(WRITABLE_DIRS.iter().map(|d| (*d, AccessFs::from_all(abi))));
    rules.extend(extra_writable.iter().map(|d| (*d, AccessFs::from_all(abi))));
    rules.extend(WRITABLE_DEVICES.iter().map(|d| (*d, dev_access)));
    let mut created = ruleset;
    for (path, access) in rules {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            // A device or directory this root lacks is simply not granted.
            Err(_) if path != "/" => continue,
            Err(e) => return Err(setup(&e)),
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| setup(&e))?;
    }
    let status = created.restrict_self().map_err(|e| setup(&e))?;
    let kernel_abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => Some(kernel_abi.map(|v| v as u32).unwrap_or(effective_abi as u32)),
        _ => None,
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(LandlockReport {
            status: "enforced".into(),
            abi: kernel_abi,
        }),
        RulesetStatus::PartiallyEnforced => Ok(LandlockReport {
            status: format!(
                "partial (kernel ABI {}; cordon targets {})",
                kernel_abi.unwrap_or(0),
                abi as u32
            ),
            abi: kernel_abi,
        }),
        RulesetStatus::NotEnforced => {
            let why = format!("{:?}", status.landlock);
            if allow_degraded {
                Ok(LandlockReport {
                    status: format!("disabled ({why}; allowed by --allow-degraded landlock)"),
                    abi: None,
                })
            } else {
                Err(LandlockError::NotEnforced(why))
            }
        }
    }
}

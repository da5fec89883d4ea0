//! The policy file: its schema (what serde reads) and its validation (what the schema alone
//! cannot say). Pure: text in, a checked [`Policy`] or an error naming the entry out.
//!
//! The format is documented key by key in `profiles/seccomp/README.md`; keep the two in step.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::syscalls;
use super::{EntryProblem, SeccompError};

/// The built-in policies: each is `profiles/seccomp/<name>.toml`, compiled by the build script.
pub const BUILTINS: &[&str] = &["default"];

/// The file as written. Unknown keys are rejected at every level.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyFile {
    /// Required. The policy's name, reported in the run's result.
    pub name: String,
    /// Optional, default "". One line for humans; the compiler does not use it.
    #[serde(default)]
    #[allow(dead_code)]
    pub description: String,
    /// Optional, default empty. The deny entries, in any order.
    #[serde(default)]
    pub deny: Vec<Entry>,
}

/// One `[[deny]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    /// Required. One syscall name or a list of names sharing the same reason and arguments.
    pub syscall: SyscallNames,
    /// Required, non-empty. Why the entry exists.
    pub why: String,
    /// Optional, default `errno`.
    #[serde(default)]
    pub action: ActionName,
    /// Optional, only with `action = "errno"`, default `EPERM`.
    #[serde(default)]
    pub errno: Option<String>,
    /// Optional, default empty (deny whatever the arguments). Conditions are AND-ed.
    #[serde(default)]
    pub args: Vec<ArgRule>,
}

#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "`syscall` to be a syscall name or a list of syscall names"
)]
pub(super) enum SyscallNames {
    One(String),
    Many(Vec<String>),
}

impl SyscallNames {
    pub(super) fn as_slice(&self) -> &[String] {
        match self {
            SyscallNames::One(s) => std::slice::from_ref(s),
            SyscallNames::Many(v) => v,
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ActionName {
    #[default]
    Errno,
    KillProcess,
    Trap,
    /// Only in cordon's own memory-watch layer (`profiles/seccomp/memory-watch.toml`): the
    /// payload installs the run's program with a listener that cordon's supervisor answers. A user policy
    /// cannot use it (nothing would answer; `compile_policy_str` refuses it).
    UserNotif,
    Log,
}

/// One condition on one argument.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArgRule {
    /// Required, 0..=5.
    pub index: u8,
    /// Required, 32 or 64: how many low bits of the argument are compared.
    pub width: u8,
    /// Required.
    pub op: OpName,
    /// Required. Must fit in `width` bits.
    pub value: u64,
    /// Required with `op = "masked_eq"`, refused otherwise. Must fit in `width` bits.
    #[serde(default)]
    pub mask: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum OpName {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    MaskedEq,
}

/// What a matching call gets. Ordered as the kernel ranks them (most precedent first), which is
/// also the order in which the filters are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    KillProcess,
    Trap,
    Errno(i32),
    UserNotif,
    Log,
}

impl Action {
    /// Short label used in error messages.
    pub fn label(self) -> String {
        match self {
            Action::KillProcess => "kill_process".into(),
            Action::Trap => "trap".into(),
            Action::Errno(e) => format!("errno {}", errno_name(e).unwrap_or("?")),
            Action::UserNotif => "user_notif".into(),
            Action::Log => "log".into(),
        }
    }
}

/// A condition after validation: the argument, its width, the comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub index: u8,
    pub wide: bool,
    pub op: OpName,
    pub value: u64,
    pub mask: u64,
}

/// A checked policy: per action, per syscall number, the OR-ed list of AND-ed conditions.
/// An empty list means "whatever the arguments".
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub groups: BTreeMap<Action, BTreeMap<u32, Vec<Vec<Condition>>>>,
}

/// errno names accepted by `errno = "..."`.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("EACCES", libc::EACCES),
    ("ENOSYS", libc::ENOSYS),
    ("EINVAL", libc::EINVAL),
    ("ENOTTY", libc::ENOTTY),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ENOPROTOOPT", libc::ENOPROTOOPT),
];

fn errno_name(e: i32) -> Option<&'static str> {
    ERRNOS.iter().find(|(_, v)| *v == e).map(|(n, _)| *n)
}

/// Parses and validates a policy. `origin` says where the text came from, for messages.
pub(super) fn parse(origin: &str, text: &str) -> Result<Policy, SeccompError> {
    let file: PolicyFile = toml::from_str(text).map_err(|source| SeccompError::Parse {
        origin: origin.to_string(),
        source: Box::new(source),
    })?;
    validate(file)
}

/// Where each syscall was first seen: (entry number, action, conditional?).
type Seen = BTreeMap<u32, (usize, Action, bool)>;

fn validate(file: PolicyFile) -> Result<Policy, SeccompError> {
    let name = file.name.trim().to_string();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(SeccompError::InvalidName { name: file.name });
    }

    let mut groups: BTreeMap<Action, BTreeMap<u32, Vec<Vec<Condition>>>> = BTreeMap::new();
    let mut seen: Seen = BTreeMap::new();

    for (i, entry) in file.deny.iter().enumerate() {
        let number = i + 1;
        let fail = |problem: EntryProblem| SeccompError::InvalidEntry {
            policy: name.clone(),
            entry: number,
            syscalls: entry.syscall.as_slice().join(", "),
            problem,
        };

        if entry.why.trim().is_empty() {
            return Err(fail(EntryProblem::EmptyWhy));
        }
        let names = entry.syscall.as_slice();
        if names.is_empty() {
            return Err(fail(EntryProblem::NoSyscall));
        }

        let action = match (entry.action, &entry.errno) {
            (ActionName::Errno, None) => Action::Errno(libc::EPERM),
            (ActionName::Errno, Some(e)) => match ERRNOS.iter().find(|(n, _)| n == e) {
                Some((_, v)) => Action::Errno(*v),
                None => return Err(fail(EntryProblem::UnknownErrno(e.clone()))),
            },
            (ActionName::KillProcess, None) => Action::KillProcess,
            (ActionName::Trap, None) => Action::Trap,
            (ActionName::UserNotif, None) => Action::UserNotif,
            (ActionName::Log, None) => Action::Log,
            (_, Some(_)) => return Err(fail(EntryProblem::ErrnoWithoutErrnoAction)),
        };

        let conditions = entry
            .args
            .iter()
            .map(check_arg)
            .collect::<Result<Vec<_>, _>>()
            .map_err(&fail)?;

        let mut numbers = Vec::with_capacity(names.len());
        for syscall in names {
            let nr = syscalls::number(syscall)
                .ok_or_else(|| fail(EntryProblem::UnknownSyscall(syscall.clone())))?;
            if numbers.contains(&nr) {
                return Err(fail(EntryProblem::DuplicateSyscall(syscall.clone())));
            }
            numbers.push(nr);

            let conditional = !conditions.is_empty();
            if let Some(&(other, other_action, other_conditional)) = seen.get(&nr) {
                if other_action != action {
                    return Err(fail(EntryProblem::ConflictingAction {
                        syscall: syscall.clone(),
                        other_entry: other,
                    }));
                }
                if !conditional || !other_conditional {
                    return Err(fail(EntryProblem::Redundant {
                        syscall: syscall.clone(),
                        other_entry: other,
                    }));
                }
            } else {
                seen.insert(nr, (number, action, conditional));
            }

            let rules = groups.entry(action).or_default().entry(nr).or_default();
            if conditional {
                rules.push(conditions.clone());
            }
        }
    }

    Ok(Policy { name, groups })
}

fn check_arg(a: &ArgRule) -> Result<Condition, EntryProblem> {
    if a.index > 5 {
        return Err(EntryProblem::ArgIndex(a.index));
    }
    let wide = match a.width {
        32 => false,
        64 => true,
        w => return Err(EntryProblem::ArgWidth(w)),
    };
    let mask = match (a.op, a.mask) {
        (OpName::MaskedEq, Some(m)) => m,
        (OpName::MaskedEq, None) => return Err(EntryProblem::MaskRequired),
        (_, Some(_)) => return Err(EntryProblem::MaskNotAllowed),
        (_, None) => u64::MAX,
    };
    if !wide {
        for (what, v) in [
            ("value", a.value),
            ("mask", if a.mask.is_some() { mask } else { 0 }),
        ] {
            if v > u64::from(u32::MAX) {
                return Err(EntryProblem::TooWide { what, value: v });
            }
        }
    }
    if a.op == OpName::MaskedEq && a.value & !mask != 0 {
        return Err(EntryProblem::ValueOutsideMask {
            value: a.value,
            mask,
        });
    }
    Ok(Condition {
        index: a.index,
        wide,
        op: a.op,
        value: a.value,
        mask,
    })
}

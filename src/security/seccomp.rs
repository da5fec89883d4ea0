//! seccomp: a policy kept as a data file (`profiles/seccomp/*.toml`, a comment on every
//! entry), compiled to BPF in the parent (pure), installed by the payload as its last step.
//!
//! SKELETON: the policy compiler is being written; this stub compiles nothing.

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp policy `{0}` is not known; the built-in policies are: default")]
    UnknownPolicy(String),
    #[error("cannot install the seccomp filter: {0}; the kernel must have CONFIG_SECCOMP_FILTER")]
    Install(String),
}

/// A compiled filter program, ready to install.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub name: String,
    pub filters: Vec<seccompiler::BpfProgram>,
}

/// Loads and compiles a built-in policy by name.
pub fn compile_builtin(name: &str) -> Result<Compiled, SeccompError> {
    if name != "default" {
        return Err(SeccompError::UnknownPolicy(name.into()));
    }
    Ok(Compiled {
        name: name.into(),
        filters: Vec::new(),
    })
}

/// Installs the filters on the calling thread. Needs `no_new_privs` already set.
pub fn install(c: &Compiled) -> Result<(), SeccompError> {
    for f in &c.filters {
        seccompiler::apply_filter(f).map_err(|e| SeccompError::Install(e.to_string()))?;
    }
    Ok(())
}

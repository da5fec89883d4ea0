//! The launcher: parent (supervisor), init (pid 1 of the sandbox) and payload roles.
use crate::outcome::Outcome;
use crate::spec::SandboxSpec;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Spec(#[from] crate::spec::ParseError),
}

/// Runs one sandbox to completion.
pub fn run(_spec: &SandboxSpec) -> Result<Outcome, LaunchError> {
    Err(LaunchError::Spec(crate::spec::ParseError::new("launcher", "", "not built yet")))
}

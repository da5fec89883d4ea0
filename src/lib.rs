//! cordon: run untrusted code in a Linux sandbox, with no daemon and no setuid bit.
//!
//! The CLI, profiles, JSON requests and OCI bundles build one [`spec::SandboxSpec`]. The
//! hardened launcher ([`launch`]) runs cordon's own sandboxes to completion and returns one
//! [`outcome::Outcome`]. The OCI runtime ([`oci`]) maps config.json into a `SandboxSpec` with
//! its [`spec::ContainerSetup`] and builds the container from it, with the process model
//! runc's callers expect (`create` returns, the caller waits on the container's pid); the two
//! launchers share the steps both need (id maps, the bounding set, rlimits, the seccomp
//! installer and syscall table) and each refuses a spec field it does not honour.
//!
//! Running code in a language:
//!
//! ```
//! use cordon::{Request, Sandbox};
//!
//! # fn main() -> Result<(), cordon::run::RunError> {
//! let sandbox = Sandbox::new().without_history();
//! let outcome = sandbox.execute(&Request::code("python", "print(6 * 7)"))?;
//! assert!(outcome.success);
//! assert_eq!(outcome.output, "42\n");
//! assert_eq!(outcome.status, cordon::Status::Ok);
//! # Ok(())
//! # }
//! ```
//!
//! A sandbox must be started from a single-threaded process (the kernel refuses a new user
//! namespace to a multi-threaded one): call [`Sandbox::execute`] before starting threads, or
//! from a child process (as `cordon run --requests --jobs N` does).

pub mod cache;
pub mod cli;
pub mod commands;
pub mod deps;
pub mod doctor;
pub mod fs;
pub mod history;
pub mod launch;
pub mod limits;
pub mod net;
pub mod oci;
pub mod outcome;
pub mod output;
pub mod profile;
pub mod request;
pub mod rootfs;
pub mod run;
pub mod security;
pub mod spec;
pub mod sys;
#[cfg(test)]
mod test_rand;

pub use launch::{LaunchError, run as run_spec};
pub use outcome::{Outcome, Status};
pub use spec::SandboxSpec;

pub use run::RunRequest as Request;

/// The library entry point: runs [`Request`]s and reads the history.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    options: run::RunOptions,
}

impl Sandbox {
    /// A sandbox runner with the defaults of `cordon run`: profile limits, the compile cache,
    /// the history file, file collection.
    pub fn new() -> Sandbox {
        Sandbox {
            options: run::RunOptions {
                passthrough: false,
                ..run::RunOptions::default()
            },
        }
    }

    /// A runner with explicit options.
    pub fn with_options(options: run::RunOptions) -> Sandbox {
        Sandbox { options }
    }

    /// The same runner, not recording its runs in the history file.
    pub fn without_history(mut self) -> Sandbox {
        self.options.history = false;
        self
    }

    /// Runs one request (compiling first for compiled languages) and returns its outcome.
    pub fn execute(&self, request: &Request) -> Result<Outcome, run::RunError> {
        run::execute(request, &self.options)
    }

    /// The newest `n` history records, oldest first.
    pub fn history(&self, n: usize) -> Result<Vec<history::Record>, history::HistoryError> {
        history::History::open_default()?.last(n)
    }
}

//! cordon: run untrusted code in a Linux sandbox, with no daemon and no setuid bit.
//!
//! Every front door (the CLI, JSON requests, OCI bundles) builds one [`spec::SandboxSpec`];
//! one launcher ([`launch`]) runs it and returns one [`outcome::Outcome`].

pub mod cli;
pub mod doctor;
pub mod fs;
pub mod launch;
pub mod limits;
pub mod outcome;
pub mod rootfs;
pub mod security;
pub mod spec;
pub mod sys;

pub use launch::{LaunchError, run};
pub use outcome::{Outcome, Status};
pub use spec::SandboxSpec;

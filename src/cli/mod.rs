//! clap definitions only: the command line, and its translation into a [`SandboxSpec`].

use crate::spec::{self, BackendChoice, Degrade, Rootfs, SandboxSpec, StdinSource};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "cordon",
    version,
    about = "Run untrusted code in a Linux sandbox: no daemon, no setuid bit."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command in a fresh sandbox and return when every process of it is gone.
    Exec(Box<ExecArgs>),
    /// Check which isolation mechanisms this host offers, and how to fix missing ones.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Auto,
    CgroupV2,
    CgroupV1,
    Rlimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DegradeArg {
    /// Run even when Landlock is not available (reported in the result).
    Landlock,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Print the result object as JSON on stdout (the program's output is inside it).
    #[arg(long)]
    pub json: bool,
    /// Wall-clock limit (30, 1.5s, 500ms, 2m).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = spec::parse_duration)]
    pub timeout: std::time::Duration,
    /// CPU-time limit of the whole sandbox (default: none).
    #[arg(long, value_name = "DUR", value_parser = spec::parse_duration)]
    pub cpu_time: Option<std::time::Duration>,
    /// Memory limit, no swap (512M, 1G; 0 = none).
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = spec::parse_size)]
    pub memory: u64,
    /// CPU bandwidth in CPUs (0 = none).
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    pub cpus: f64,
    /// Processes and threads alive at once (0 = none).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub pids: u64,
    /// Bytes kept of stdout and of stderr, each; exceeding it kills the sandbox.
    #[arg(long, value_name = "SIZE", default_value = "10M", value_parser = spec::parse_size)]
    pub output_limit: u64,
    /// Largest file the program may write.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = spec::parse_size)]
    pub file_size: u64,
    /// Open file descriptors per process.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub open_files: u64,
    /// Size of the /workspace tmpfs.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = spec::parse_size)]
    pub workspace_size: u64,
    /// Size of the /tmp and /dev/shm tmpfs.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = spec::parse_size)]
    pub tmp_size: u64,
    /// Add KEY=VALUE to the program's environment (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = spec::parse_env_pair)]
    pub env: Vec<(String, String)>,
    /// Feed this file to the program's stdin (default: cordon's own stdin, through a pipe).
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// `host` (read-only /usr of this machine) or a root filesystem directory.
    #[arg(long, value_name = "host|DIR", default_value = "host")]
    pub rootfs: String,
    /// Accept running without a layer the host lacks (reported in the result).
    #[arg(long, value_name = "LAYER", value_delimiter = ',')]
    pub allow_degraded: Vec<DegradeArg>,
    /// Which limits backend to use; forcing one the host lacks is an error.
    #[arg(long, value_name = "BACKEND", default_value = "auto")]
    pub limits_backend: BackendArg,
    /// Hostname inside the sandbox.
    #[arg(long, default_value = spec::DEFAULT_HOSTNAME)]
    pub hostname: String,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl ExecArgs {
    /// The sandbox these arguments describe.
    pub fn to_spec(&self) -> SandboxSpec {
        let nonzero = |v: u64| if v == 0 { None } else { Some(v) };
        let mut s = SandboxSpec::new(self.command.clone());
        s.env = self.env.clone();
        s.hostname = self.hostname.clone();
        s.rootfs = if self.rootfs == "host" {
            Rootfs::Host
        } else {
            Rootfs::Dir(PathBuf::from(&self.rootfs))
        };
        s.stdin = match &self.stdin {
            Some(p) => StdinSource::File(p.clone()),
            None => StdinSource::Forward,
        };
        s.degrade = Degrade {
            landlock: self.allow_degraded.contains(&DegradeArg::Landlock),
        };
        s.backend = match self.limits_backend {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::CgroupV2 => BackendChoice::CgroupV2,
            BackendArg::CgroupV1 => BackendChoice::CgroupV1,
            BackendArg::Rlimit => BackendChoice::Rlimit,
        };
        let l = &mut s.limits;
        l.wall = self.timeout;
        l.cpu_time = self.cpu_time;
        l.memory = nonzero(self.memory);
        l.cpus = if self.cpus == 0.0 {
            None
        } else {
            Some(self.cpus)
        };
        l.pids = nonzero(self.pids);
        l.output = self.output_limit;
        l.file_size = nonzero(self.file_size);
        l.open_files = self.open_files;
        l.workspace_size = self.workspace_size;
        l.tmp_size = self.tmp_size;
        s.passthrough = !self.json;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_the_spec() {
        let cli = Cli::try_parse_from([
            "cordon",
            "exec",
            "--memory",
            "64M",
            "--pids",
            "0",
            "--timeout",
            "2s",
            "-e",
            "A=1",
            "--json",
            "--",
            "echo",
            "--not-a-flag",
        ])
        .unwrap();
        let Command::Exec(a) = cli.command else {
            panic!("exec expected")
        };
        let s = a.to_spec();
        assert_eq!(s.argv, vec!["echo", "--not-a-flag"]);
        assert_eq!(s.limits.memory, Some(64 << 20));
        assert_eq!(s.limits.pids, None);
        assert_eq!(s.limits.wall, std::time::Duration::from_secs(2));
        assert_eq!(s.env, vec![("A".to_string(), "1".to_string())]);
        assert!(!s.passthrough);
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let cli = Cli::try_parse_from(["cordon", "exec", "--", "true"]).unwrap();
        let Command::Exec(a) = cli.command else {
            panic!("exec expected")
        };
        let s = a.to_spec();
        assert_eq!(s.limits, crate::spec::Limits { ..s.limits.clone() });
        assert_eq!(s.limits.memory, Some(512 << 20));
        assert_eq!(s.limits.pids, Some(64));
        assert_eq!(s.limits.cpus, Some(1.0));
        assert_eq!(s.limits.output, 10 << 20);
        assert_eq!(s.limits.wall, std::time::Duration::from_secs(30));
        assert!(s.passthrough);
        assert!(Cli::try_parse_from(["cordon", "exec", "--memory", "lots", "--", "true"]).is_err());
    }
}

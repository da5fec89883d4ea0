//! clap definitions of `cordon-oci` (and `cordon oci`): runc's command line.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "cordon-oci",
    version,
    about = "cordon as an OCI runtime (runc's command line), for podman, containerd and Kubernetes."
)]
pub struct OciCli {
    #[command(flatten)]
    pub global: OciGlobal,
    #[command(subcommand)]
    pub command: OciCommand,
}

#[derive(Debug, Args, Clone, Default)]
pub struct OciGlobal {
    /// State directory (default /run/cordon as root, $XDG_RUNTIME_DIR/cordon otherwise).
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Write errors (and --debug messages) to this file as well.
    #[arg(long, global = true, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Format of --log lines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log each step.
    #[arg(long, global = true)]
    pub debug: bool,
    /// Accepted; `slice:prefix:name` cgroup paths become `slice/prefix-name.scope`.
    #[arg(long, global = true)]
    pub systemd_cgroup: bool,
    /// Accepted (true|false|auto); cordon-oci detects rootless mode from its euid. With
    /// `spec`: write a config for an unprivileged user (own user namespace, no cgroup).
    #[arg(long, global = true, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub rootless: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args, Clone)]
pub struct CreateArgs {
    /// The bundle directory (config.json and usually rootfs/).
    #[arg(long, short = 'b', default_value = ".")]
    pub bundle: PathBuf,
    /// Write the container's pid here.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Unix socket that receives the pty master when process.terminal is true.
    #[arg(long, value_name = "PATH")]
    pub console_socket: Option<PathBuf>,
    /// Pass this many extra fds (from 3 up) to the container.
    #[arg(long, default_value_t = 0)]
    pub preserve_fds: i32,
    /// Use MS_MOVE + chroot instead of pivot_root.
    #[arg(long)]
    pub no_pivot: bool,
    /// Keep the caller's session keyring (by default the container's processes get a new one
    /// of their own, as with runc).
    #[arg(long)]
    pub no_new_keyring: bool,
    /// The container's ID (unique under --root).
    pub id: String,
}

#[derive(Debug, Subcommand)]
pub enum OciCommand {
    /// Create a container; its process waits for `start`.
    Create(CreateArgs),
    /// Start a created container's process.
    Start {
        /// The container's ID.
        id: String,
    },
    /// Print a container's state as JSON.
    State {
        /// The container's ID.
        id: String,
    },
    /// Send a signal (default SIGTERM) to the container's process (--all: every process).
    Kill {
        /// The container's ID.
        id: String,
        /// A signal name (TERM, SIGTERM) or number.
        #[arg(default_value = "SIGTERM")]
        signal: String,
        /// Signal every process of the container (its cgroup's, sub-cgroups included), not
        /// only its init.
        #[arg(long, short = 'a')]
        all: bool,
    },
    /// Delete a stopped container (--force: kill it first).
    Delete {
        /// The container's ID.
        id: String,
        /// Kill a container that is still running (SIGKILL to every process) and delete it;
        /// a container that does not exist is not an error.
        #[arg(long, short = 'f')]
        force: bool,
    },
    /// Create, start and wait for a container; exit with its status.
    Run {
        #[command(flatten)]
        create: CreateArgs,
        /// Return once the container started.
        #[arg(long, short = 'd')]
        detach: bool,
        /// Keep the container after it exits.
        #[arg(long)]
        keep: bool,
    },
    /// Run a process in a running container.
    Exec(ExecArgs),
    /// List containers.
    List {
        /// `table` or `json`.
        #[arg(long, short = 'f', default_value = "table")]
        format: String,
        /// Print the IDs only.
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// List a container's processes.
    Ps {
        /// The container's ID.
        id: String,
        /// `table` (ps(1)'s output) or `json` (the pids).
        #[arg(long, short = 'f', default_value = "table")]
        format: String,
        /// Options for ps(1) in table format.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        ps_args: Vec<String>,
    },
    /// Write a starting config.json (`spec --rootless`: for an unprivileged user).
    Spec {
        /// Where to write config.json.
        #[arg(long, short = 'b', default_value = ".")]
        bundle: PathBuf,
    },
    /// Print what this runtime supports, as JSON (runtime-spec features.md).
    Features,
    /// Freeze every process of a container.
    Pause {
        /// The container's ID.
        id: String,
    },
    /// Thaw a paused container.
    Resume {
        /// The container's ID.
        id: String,
    },
    /// Change a container's resource limits.
    Update(UpdateArgs),
    /// Print resource usage (--stats once, else every --interval).
    Events {
        /// The container's ID.
        id: String,
        /// Print the resource usage once, as JSON, and exit.
        #[arg(long)]
        stats: bool,
        /// How often to print it without --stats.
        #[arg(long, default_value = "5s")]
        interval: String,
    },
    /// runc's `checkpoint` and `restore`, which cordon-oci does not implement: refused with
    /// what to use instead, rather than as unknown words.
    #[command(hide = true, name = "checkpoint", alias = "restore")]
    Unsupported {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
}

#[derive(Debug, Args, Clone)]
pub struct ExecArgs {
    /// A process.json (the `process` object of config.json). It gives the whole process:
    /// --cwd, --env, --user and a command cannot be added to it.
    #[arg(long, short = 'p', value_name = "FILE", conflicts_with_all = ["cwd", "env", "user", "args"])]
    pub process: Option<PathBuf>,
    /// Return once the process started, instead of waiting for it.
    #[arg(long, short = 'd')]
    pub detach: bool,
    /// Write the process's pid here.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Give the process a terminal (its pty master goes to --console-socket).
    #[arg(long, short = 't')]
    pub tty: bool,
    /// Unix socket that receives the pty master with --tty.
    #[arg(long, value_name = "PATH")]
    pub console_socket: Option<PathBuf>,
    /// The process's working directory (default: the container's).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Add KEY=VALUE to the process's environment (repeatable).
    #[arg(long, short = 'e')]
    pub env: Vec<String>,
    /// uid[:gid]
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Pass this many extra fds (from 3 up) to the process.
    #[arg(long, default_value_t = 0)]
    pub preserve_fds: i32,
    /// The container's ID.
    pub id: String,
    /// The command and its arguments (unless --process gives them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct UpdateArgs {
    /// A JSON file with linux.resources ("-" for stdin).
    #[arg(long, short = 'r', value_name = "FILE")]
    pub resources: Option<PathBuf>,
    /// Bytes; -1: no limit.
    #[arg(long, allow_negative_numbers = true)]
    pub memory: Option<i64>,
    /// Memory plus swap, bytes; -1: no limit.
    #[arg(long, allow_negative_numbers = true)]
    pub memory_swap: Option<i64>,
    /// Soft memory limit (reclaimed down to under pressure), bytes; -1: none.
    #[arg(long, allow_negative_numbers = true)]
    pub memory_reservation: Option<i64>,
    /// Microseconds per period; -1: no quota.
    #[arg(long, allow_negative_numbers = true)]
    pub cpu_quota: Option<i64>,
    /// The period --cpu-quota is counted over, microseconds.
    #[arg(long)]
    pub cpu_period: Option<u64>,
    /// Relative CPU weight, as cgroup v1's cpu.shares (cpu.weight on cgroup v2).
    #[arg(long)]
    pub cpu_share: Option<u64>,
    /// CPUs the processes may run on (`0-3,5`).
    #[arg(long)]
    pub cpuset_cpus: Option<String>,
    /// Memory nodes the processes may allocate on (`0`).
    #[arg(long)]
    pub cpuset_mems: Option<String>,
    /// Processes at once; -1 (or 0): no limit.
    #[arg(long, allow_negative_numbers = true)]
    pub pids_limit: Option<i64>,
    /// Relative block I/O weight, 10 to 1000 (blkio.bfq.weight; io.bfq.weight or io.weight on cgroup v2).
    #[arg(long, value_parser = clap::value_parser!(u16).range(10..=1000))]
    pub blkio_weight: Option<u16>,
    /// The container's ID.
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn exec_process_gives_the_whole_process() {
        let parse = |args: &[&str]| {
            OciCli::try_parse_from(["cordon-oci", "exec"].iter().chain(args))
                .map(|c| match c.command {
                    OciCommand::Exec(a) => a.process,
                    _ => unreachable!("an exec command"),
                })
                .map_err(|e| e.to_string())
        };
        // As podman and containerd call it.
        assert_eq!(
            parse(&["--process", "/p.json", "--detach", "--pid-file", "/x", "c1"]),
            Ok(Some(PathBuf::from("/p.json")))
        );
        for extra in [
            &["--cwd", "/tmp"][..],
            &["--env", "A=1"],
            &["--user", "1:1"],
            &["sh", "-c", "true"],
        ] {
            let mut args = vec!["--process", "/p.json", "c1"];
            args.extend(extra);
            let e = parse(&args).unwrap_err();
            assert!(e.contains("cannot be used with"), "{extra:?}: {e}");
        }
    }
}

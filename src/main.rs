//! The `cordon` binary: parse the command line and dispatch to the library's commands.

use cordon::cli::{Cli, Command, RootfsCommand};
use cordon::commands;

/// cordon's heap (see `cordon::sys::Heap`): fewer page faults and TLB flushes at start-up.
#[global_allocator]
static ALLOCATOR: cordon::sys::Heap = cordon::sys::Heap;

fn main() {
    // Usage errors exit 125 (cordon failed before the program ran), not clap's 2, which a
    // program's own exit code 2 could not be told apart from.
    let cli = match Cli::parse_args() {
        Ok(c) => c,
        Err(e) => {
            if e.use_stderr() {
                let answer = cordon::cli::json_answer(std::env::args_os());
                commands::usage_error_json(&e.render().to_string(), answer);
            }
            let _ = e.print();
            std::process::exit(if e.use_stderr() {
                cordon::outcome::exit_codes::SANDBOX_ERROR
            } else {
                0
            });
        }
    };
    if !matches!(cli.command, Command::Exec(_) | Command::Run(_)) {
        cordon::sys::default_sigpipe();
    }
    let code = match cli.command {
        Command::Exec(args) => commands::exec(&args),
        Command::Run(args) => commands::run(&args),
        Command::Profiles { json, profiles } => commands::profiles(json, &profiles),
        Command::History { last, json } => commands::history(last, json),
        Command::Rootfs(RootfsCommand::Build { lang }) => commands::rootfs_build(&lang),
        Command::Rootfs(RootfsCommand::List { json }) => commands::rootfs_list(json),
        Command::Oci(cli) => cordon::oci::main(*cli),
        Command::Doctor { json } => cordon::doctor::main(json),
    };
    // Nothing cordon forked is left for the caller's reaper to collect (see the function).
    cordon::launch::wait_for_helpers();
    std::process::exit(code);
}

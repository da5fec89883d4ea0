//! The `cordon` binary: parse the command line and dispatch to the library's commands.

use clap::Parser;
use cordon::cli::{Cli, Command, RootfsCommand};
use cordon::commands;

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Exec(args) => commands::exec(&args),
        Command::Run(args) => commands::run(&args),
        Command::Profiles { json, profiles } => commands::profiles(json, &profiles),
        Command::History { last, json } => commands::history(last, json),
        Command::Rootfs(RootfsCommand::Build { lang }) => commands::rootfs_build(&lang),
        Command::Rootfs(RootfsCommand::List { json }) => commands::rootfs_list(json),
        Command::Doctor { json } => cordon::doctor::main(json),
    };
    std::process::exit(code);
}

//! The `cordon` binary: parse the command line, call the library, print, pick the exit code.

use clap::Parser;
use cordon::cli::{Cli, Command};
use cordon::outcome::exit_codes;

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Exec(args) => exec(&args),
        Command::Doctor { json } => cordon::doctor::main(json),
    };
    std::process::exit(code);
}

fn exec(args: &cordon::cli::ExecArgs) -> i32 {
    let spec = args.to_spec();
    match cordon::run(&spec) {
        Ok(outcome) => {
            if args.json {
                match serde_json::to_string_pretty(&outcome) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("cordon: cannot encode the result: {e}");
                        return exit_codes::SANDBOX_ERROR;
                    }
                }
            } else if let Some(m) = &outcome.message {
                eprintln!("cordon: {}: {m}", outcome.status.as_str());
            }
            outcome.cli_exit_code
        }
        Err(e) => {
            if args.json {
                let v = serde_json::json!({
                    "success": false,
                    "status": "sandbox_error",
                    "message": e.to_string(),
                    "cliExitCode": exit_codes::SANDBOX_ERROR,
                });
                println!("{v}");
            }
            eprintln!("cordon: {e}");
            exit_codes::SANDBOX_ERROR
        }
    }
}

//! `flotilla`: parse the command line, start logging, run, map the outcome to an exit
//! code (0 success, 1 the run found problems, 2 invalid input or usage).

use std::process::ExitCode;

use clap::Parser;

mod app;
mod autoscaler;
mod cli;
mod clusters;
mod controller;
mod memory;
mod output;
mod source;
mod telemetry;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    telemetry::init(cli.log_format);
    match app::run(cli) {
        Ok(outcome) => outcome.exit_code(),
        Err(err) => {
            eprintln!("error: {}", app::describe(&err));
            ExitCode::from(2)
        }
    }
}

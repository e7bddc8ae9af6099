//! `flotilla`: parse the command line, start logging, run, map the outcome to an exit
//! code (0 success, 1 the run found problems, 2 invalid input or usage).
//!
//! The modules, edges first: `commands` (one per subcommand), `source` and `git` (a
//! repository into memory), `clusters` (the executor), `host` (the host cluster),
//! `identity` (who this process is), `leader` (election), `server` (HTTP), `status` and `metrics` (what loops report);
//! the loops `reconciler` and `autoscaler`, which `controller` composes.

use std::process::ExitCode;

#[cfg(test)]
mod at_scale;
mod autoscaler;
mod cli;
mod clusters;
mod commands;
mod controller;
mod endpoints;
mod failover;
mod forge;
mod git;
mod heartbeat;
mod host;
mod identity;
mod leader;
mod members;
mod memory;
mod metrics;
mod output;
mod previews;
mod reconciler;
mod rendering;
mod rollouts;
mod server;
mod shard;
mod source;
mod status;
mod telemetry;
mod ui;

fn main() -> ExitCode {
    let cli = cli::Cli::from_env();
    telemetry::init(cli.log_format);
    source::allow_fetching(cli.fetch_charts);
    if let Err(e) = source::registry_config(cli.chart_registry_config.clone()) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    // Only the controller reaches a Git remote; every other command reads a directory or
    // a local repository. Readying libgit2 loads the system's CA bundle (~30 ms with
    // OpenSSL 3), which a `render` of a working tree should not pay.
    if matches!(cli.command, cli::Command::Run(_))
        && let Err(e) = git::prepare_network()
    {
        eprintln!("error: cannot set up Git's networking: {e}");
        return ExitCode::from(2);
    }
    match commands::run(cli) {
        Ok(outcome) => outcome.exit_code(),
        Err(err) => {
            eprintln!("error: {}", commands::describe(&err));
            ExitCode::from(2)
        }
    }
}

//! The `taskstore` binary: the service (`serve`, `dev`, `migrate`), a load
//! generator (`bench`), and a client for people (`create`, `get`, `list`,
//! `watch`, `update`, `complete`, `result`, `cancel`, `delete`, `cleanup`, `status`).
//! `taskstore --help` lists every command; each command's `--help` lists its
//! flags and their environment variables.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use taskstore::cli::{Label, report};
use taskstore::config::{Cli, Command, Mode, ServeArgs};
use taskstore::startup::StartupError;
use taskstore::{cli, startup};
use taskstore_telemetry::Telemetry;

/// Log directives added to every filter (besides the telemetry crate's,
/// which quieten lapin: a returned job, expected while no worker serves its
/// tool, is handled and reported by the relay): PostgreSQL's notices (e.g.
/// "relation _sqlx_migrations already exists, skipping" on every start)
/// are routine, not news.
const QUIET: [&str; 1] = ["sqlx::postgres::notice=warn"];

/// Added for `dev`, a person's terminal: one access line per RPC (the
/// embedded workers' claims and reports, the CLI's calls) would be most of
/// what it prints. `TASKSTORE_LOG=info,taskstore::access=info` shows them.
const QUIET_IN_DEV: [&str; 2] = ["sqlx::postgres::notice=warn", "taskstore::access=warn"];

#[tokio::main]
async fn main() -> ExitCode {
    let args = Cli::parse();
    let quiet: &[&str] = match (&args.command, args.log_level.contains("taskstore::access")) {
        (Command::Dev(_), false) => &QUIET_IN_DEV,
        _ => &QUIET,
    };
    let telemetry = match Telemetry::init("taskstore", args.log_format, &args.log_level, quiet) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            report(Label::Error, &err);
            return ExitCode::from(2);
        }
    };
    let exit = run(args.command).await;
    telemetry.shutdown();
    exit
}

async fn run(command: Command) -> ExitCode {
    // Service commands report a failure as a log line (their output is a
    // log); the others as one `error:` line.
    let service = match command {
        Command::Serve(serve) => run_service(&serve, Mode::Serve).await,
        Command::Dev(dev) => run_service(&dev, Mode::Dev).await,
        Command::Mcp(mcp) => run_service(&mcp, Mode::Mcp).await,
        Command::Migrate(database) => match database.store_location(Mode::Serve) {
            Ok(location) => startup::migrate(&location, database.pool_settings()).await,
            Err(err) => Err(StartupError::Config(err)),
        },
        Command::Client(command) => return cli::run(command).await,
        Command::Keys(keys) => return run_keys(keys).await,
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "taskstore",
                &mut std::io::stdout(),
            );
            return ExitCode::SUCCESS;
        }
        Command::Bench(bench) => {
            return match taskstore::bench::run(bench).await {
                Ok(report) => match serde_json::to_string_pretty(&report) {
                    Ok(json) => {
                        println!("{json}");
                        ExitCode::SUCCESS
                    }
                    Err(err) => failed(&err.to_string()),
                },
                Err(err) => failed(&err.to_string()),
            };
        }
    };
    match service {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "taskstore stopped with an error");
            ExitCode::FAILURE
        }
    }
}

async fn run_service(args: &ServeArgs, mode: Mode) -> Result<(), StartupError> {
    let settings = args.settings(mode).map_err(StartupError::Config)?;
    startup::serve(settings).await
}

fn failed(message: &str) -> ExitCode {
    report(Label::Error, message);
    ExitCode::FAILURE
}

/// `taskstore keys …`: one `error:` line on failure, like the client
/// commands.
async fn run_keys(keys: cli::KeysArgs) -> ExitCode {
    let store = match keys.database.store_location(Mode::Serve) {
        Ok(location) => startup::open_keys(&location, keys.database.pool_settings()).await,
        Err(err) => Err(StartupError::Config(err)),
    };
    let exit = match store {
        Ok(store) => cli::keys::run(keys.action, store).await,
        Err(err) => Err(cli::ClientError::Failed(err.to_string())),
    };
    cli::finish(exit)
}

//! The `taskstore` binary: the service (`serve`, `migrate`) and a client for
//! people (`create`, `get`, `list`, `update`, `complete`, `result`, `cancel`,
//! `cleanup`). `taskstore --help` lists every flag and its environment
//! variable.

use std::process::ExitCode;

use clap::Parser;
use taskstore::config::{Cli, Command, Mode};
use taskstore::{cli, startup, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let args = Cli::parse();
    if let Err(err) = telemetry::init(args.log_format, &args.log_level) {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    let result = match args.command {
        Command::Serve(serve) => startup::serve(*serve, Mode::Serve)
            .await
            .map_err(|err| err.to_string()),
        Command::Dev(dev) => startup::serve(*dev, Mode::Dev)
            .await
            .map_err(|err| err.to_string()),
        Command::Migrate(database) => startup::migrate(database)
            .await
            .map_err(|err| err.to_string()),
        Command::Bench(bench) => match taskstore::bench::run(bench).await {
            Ok(report) => serde_json::to_string_pretty(&report)
                .map(|json| println!("{json}"))
                .map_err(|err| err.to_string()),
            Err(err) => Err(err.to_string()),
        },
        Command::Client(command) => cli::run(command).await.map_err(|err| err.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "taskstore failed");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

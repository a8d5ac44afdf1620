//! `taskworker`: serves built-in and command tools for a taskstore service.
//! `taskworker --help` lists every flag and its environment variable.

use std::process::ExitCode;

use taskworker::cli::{self, Program};

#[tokio::main]
async fn main() -> ExitCode {
    cli::main(Program {
        name: "taskworker",
        about: "Runs dispatched MCP tasks for a taskstore service.",
        default_tools: "echo,sleep,fail,hash,noop",
        tools: Vec::new(),
    })
    .await
}

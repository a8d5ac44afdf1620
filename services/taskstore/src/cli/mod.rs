//! The client commands of `taskstore` (create, get, list, watch, update,
//! complete, result, cancel, delete, cleanup, status): a person's way into a running
//! service. They use [`GrpcTaskStore`], the same client the conformance
//! suite exercises. Each command parses its flags before it connects, so a
//! usage error is reported as one even when the service is down.

mod commands;
mod create;
mod exit;
mod input;
pub mod keys;
mod list;
mod output;
mod questions;
mod status;
mod status_dispatch;

use std::process::ExitCode;

pub use self::exit::{ClientError, Exit, Label, report};
pub use crate::config::{ClientArgs, ClientCommand, CreateArgs, EXIT_STATUSES};
pub use crate::config::{KeysAction, KeysArgs};

use taskstore_proto::credentials::{Credentials, TokenSettings};
use taskstore_proto::endpoint::ClientTls;

use crate::domain::{Scope, SessionId, TenantId};
use crate::grpc::GrpcTaskStore;

/// How the client commands name their token settings in errors.
const TOKEN_SETTINGS: TokenSettings = TokenSettings {
    flag: "--token",
    env: "TASKSTORE_TOKEN",
    file_flag: "--token-file",
    file_env: "TASKSTORE_TOKEN_FILE",
};

/// Runs a client command: prints its output, or one line saying what went
/// wrong, and returns the exit status documented in [`EXIT_STATUSES`].
pub async fn run(command: ClientCommand) -> ExitCode {
    finish(execute(command).await)
}

/// The exit status of a command that ended with `outcome`, its error said
/// on stderr, but nothing said when its reader went away (`… | head`): as
/// `ls | head`, a closed output pipe ends the command quietly.
pub fn finish(outcome: Result<Exit, ClientError>) -> ExitCode {
    match outcome {
        Ok(exit) => exit.into(),
        Err(ClientError::Output(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(err) => {
            report(Label::Error, &err.to_string());
            err.exit().into()
        }
    }
}

async fn execute(command: ClientCommand) -> Result<Exit, ClientError> {
    let args = command.client_args().clone();
    let token = TOKEN_SETTINGS
        .resolve(args.token.as_deref(), args.token_file.as_deref())
        .map_err(ClientError::Usage)?;
    let tenant = args
        .tenant
        .as_deref()
        .map(TenantId::parse)
        .transpose()
        .map_err(|err| ClientError::Usage(format!("--tenant {err}")))?;
    let credentials = Credentials::new(token, tenant.as_ref().map(TenantId::as_str))
        .map_err(|err| ClientError::Usage(format!("--tenant: {err}")))?;
    let tls = ClientTls::from_files(
        args.ca_cert.as_deref(),
        args.client_cert.as_deref(),
        args.client_key.as_deref(),
    )
    .map_err(ClientError::Usage)?;
    let mut connection = Connection {
        endpoint: args.endpoint.clone(),
        credentials,
        tls,
        store: None,
    };
    commands::run(command, &mut connection, &args).await
}

/// The service, connected on first use.
struct Connection {
    endpoint: String,
    credentials: Credentials,
    tls: ClientTls,
    store: Option<GrpcTaskStore>,
}

impl Connection {
    async fn store(&mut self) -> Result<&GrpcTaskStore, ClientError> {
        let store = match self.store.take() {
            Some(store) => store,
            None => {
                GrpcTaskStore::connect_with(&self.endpoint, self.credentials.clone(), &self.tls)
                    .await?
            }
        };
        Ok(self.store.insert(store))
    }
}

/// The scope the `--session` flag asks for. The service checks the
/// session's length against its own limit (and names it).
fn scope(session: Option<&str>) -> Result<Scope, ClientError> {
    let session = session
        .map(|s| SessionId::parse(s, usize::MAX))
        .transpose()
        .map_err(|err| ClientError::Usage(format!("--session {err}")))?;
    Ok(Scope {
        tenant: TenantId::default_tenant(),
        session,
    })
}

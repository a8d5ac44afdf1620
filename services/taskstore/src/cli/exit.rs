//! How a client command ends: one exit status a script can rely on (the
//! table in `config::EXIT_STATUSES`) and, on failure, one line on stderr that
//! says what happened and what to do.

use std::process::ExitCode;

use crate::domain::TaskId;
use crate::error::StoreError;
use crate::grpc::ConnectError;

/// The exit statuses of the client commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Done = 0,
    Error = 1,
    Usage = 2,
    TaskFailed = 3,
    TaskCancelled = 4,
    NotFound = 5,
    NotFinished = 6,
    Unavailable = 7,
    Degraded = 8,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A flag is missing or malformed.
    #[error("{0}")]
    Usage(String),
    #[error("{}", connect_message(.0))]
    Connect(#[from] ConnectError),
    /// The service refused or failed the call.
    #[error("{}", store_message(.0))]
    Store(#[from] StoreError),
    /// A task the command names was not found.
    #[error("task {0} not found: it never existed, expired, or belongs to another session")]
    TaskNotFound(TaskId),
    /// The task is still running.
    #[error("{0}")]
    NotFinished(String),
    /// Something else the command names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The command could not do its work.
    #[error("{0}")]
    Failed(String),
    #[error("cannot print: {0}")]
    Output(#[from] std::io::Error),
}

impl ClientError {
    pub fn exit(&self) -> Exit {
        match self {
            ClientError::Usage(_) | ClientError::Connect(ConnectError::Endpoint(_)) => Exit::Usage,
            ClientError::Connect(ConnectError::Unreachable { .. }) => Exit::Unavailable,
            ClientError::Store(err) => match err {
                StoreError::NotFound => Exit::NotFound,
                StoreError::Unavailable(_) => Exit::Unavailable,
                StoreError::InvalidArgument(_) => Exit::Usage,
                StoreError::AlreadyExists(_)
                | StoreError::FailedPrecondition(_)
                | StoreError::ResourceExhausted(_)
                | StoreError::Unauthenticated(_)
                | StoreError::PermissionDenied(_)
                | StoreError::Internal(_) => Exit::Error,
            },
            ClientError::TaskNotFound(_) => Exit::NotFound,
            ClientError::NotFinished(_) => Exit::NotFinished,
            ClientError::NotFound(_) => Exit::NotFound,
            ClientError::Output(_) | ClientError::Failed(_) => Exit::Error,
        }
    }

    /// A store error about the task `id`, naming it where that helps.
    pub fn about(id: &TaskId) -> impl Fn(StoreError) -> ClientError + '_ {
        move |err| match err {
            StoreError::NotFound => ClientError::TaskNotFound(id.clone()),
            other => ClientError::Store(other),
        }
    }
}

fn connect_message(err: &ConnectError) -> String {
    match err {
        ConnectError::Endpoint(_) => err.to_string(),
        ConnectError::Unreachable { .. } => format!(
            "{err}; is the service running there? (start one with `taskstore dev`, or point \
             --endpoint or TASKSTORE_ENDPOINT at yours)"
        ),
    }
}

/// The service's words for a store error, without the variant's prefix, and
/// with what to do where there is something to do.
fn store_message(err: &StoreError) -> String {
    match err {
        StoreError::InvalidArgument(message)
        | StoreError::ResourceExhausted(message)
        | StoreError::Unavailable(message) => message.clone(),
        StoreError::FailedPrecondition(refusal) => refusal.to_string(),
        StoreError::NotFound => "task not found".to_owned(),
        StoreError::Unauthenticated(message) => format!(
            "the service refused the credentials ({message}): pass an API key with --token-file, --token or TASKSTORE_TOKEN"
        ),
        StoreError::PermissionDenied(message) => {
            format!("not allowed: {message} (ask for a key with the right role)")
        }
        StoreError::AlreadyExists(id) => format!(
            "task {id} already exists: choose another --task-id, or leave it out for a generated id"
        ),
        StoreError::Internal(message) => {
            format!("the service failed ({message}); the details are in its log")
        }
    }
}

/// Prints `message` to stderr as one line, labelled `label` (coloured only
/// on a terminal, and never when NO_COLOR is set).
pub fn report(label: Label, message: &str) {
    let colour = taskstore_telemetry::logs::colour_on_stderr();
    let name = match label {
        Label::Error => "error",
        Label::Warning => "warning",
    };
    if colour {
        let code = match label {
            Label::Error => "1;31",
            Label::Warning => "1;33",
        };
        eprintln!("\x1b[{code}m{name}:\x1b[0m {message}");
    } else {
        eprintln!("{name}: {message}");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Error,
    Warning,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_store_error_reads_as_what_happened() {
        let id = TaskId::parse("x").expect("id");
        let cases = [
            (
                StoreError::AlreadyExists("x".into()),
                "task x already exists: choose another --task-id, or leave it out for a generated id",
                Exit::Error,
            ),
            (
                StoreError::InvalidArgument("cursor is malformed".into()),
                "cursor is malformed",
                Exit::Usage,
            ),
            (
                StoreError::Unavailable("the service is shutting down".into()),
                "the service is shutting down",
                Exit::Unavailable,
            ),
            (
                StoreError::Internal("database error".into()),
                "the service failed (database error); the details are in its log",
                Exit::Error,
            ),
        ];
        for (err, message, exit) in cases {
            let err = ClientError::about(&id)(err);
            assert_eq!(err.to_string(), message);
            assert_eq!(err.exit(), exit);
        }
        let missing = ClientError::about(&id)(StoreError::NotFound);
        assert_eq!(missing.exit(), Exit::NotFound);
        assert!(missing.to_string().starts_with("task x not found"));
    }
}

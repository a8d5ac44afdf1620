//! `list`: a page (or, with `--all`, every page) of tasks, and the command
//! that prints the next page.

use super::exit::{ClientError, Exit};
use super::output::Output;
use crate::config::ClientArgs;
use crate::domain::{PageRequest, Scope, TaskFilter};
use crate::error::StoreError;
use crate::grpc::GrpcTaskStore;
use crate::store::TaskStore;

/// What a listing asks for besides its cursor.
pub(super) struct Listing {
    pub(super) filter: TaskFilter,
    pub(super) page_size: Option<u32>,
}

pub(super) async fn list(
    store: &GrpcTaskStore,
    scope: &Scope,
    listing: &Listing,
    cursor: Option<String>,
    all: bool,
    args: &ClientArgs,
    out: Output,
) -> Result<Exit, ClientError> {
    let request = |cursor| PageRequest {
        cursor,
        page_size: listing.page_size,
        filter: listing.filter.clone(),
    };
    let mut page = store
        .list_tasks(scope, request(cursor))
        .await
        .map_err(cursor_hint)?;
    // With --all, one listing (one JSON document) of every page.
    while all && let Some(cursor) = page.next_cursor.take() {
        let next = store
            .list_tasks(scope, request(Some(cursor)))
            .await
            .map_err(cursor_hint)?;
        page.tasks.extend(next.tasks);
        page.next_cursor = next.next_cursor;
    }
    let more = page
        .next_cursor
        .as_deref()
        .map(|cursor| next_page_command(args, listing, cursor));
    out.page(&page, more.as_deref())?;
    Ok(Exit::Done)
}

/// A refused cursor, with how to get a good one.
fn cursor_hint(err: StoreError) -> ClientError {
    match err {
        StoreError::InvalidArgument(message) if message.starts_with("cursor") => {
            ClientError::Usage(format!(
                "{message}: pass the cursor that `taskstore list` printed, with the same \
                 --session, --status and --tool"
            ))
        }
        other => ClientError::Store(other),
    }
}

/// The command that lists the page after `cursor`.
fn next_page_command(args: &ClientArgs, listing: &Listing, cursor: &str) -> String {
    let mut command = vec!["taskstore list".to_owned()];
    if let Some(tenant) = &args.tenant {
        command.push(format!("--tenant {}", shell_quote(tenant)));
    }
    if let Some(session) = &args.session {
        command.push(format!("--session {}", shell_quote(session)));
    }
    let statuses: Vec<&str> = listing
        .filter
        .statuses()
        .iter()
        .map(|s| s.as_str())
        .collect();
    if !statuses.is_empty() {
        command.push(format!("--status {}", statuses.join(",")));
    }
    if let Some(tool) = &listing.filter.tool {
        command.push(format!("--tool {tool}"));
    }
    if let Some(size) = listing.page_size {
        command.push(format!("--page-size {size}"));
    }
    command.push(format!("--cursor {cursor}"));
    command.join(" ")
}

/// `text` as one shell word.
pub(super) fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.:/@%+=,".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{TaskStatus, ToolName};

    #[test]
    fn the_next_page_command_repeats_the_listing() {
        let args = ClientArgs {
            endpoint: String::new(),
            session: Some("it's".into()),
            token: Some("tsk_secret".into()),
            token_file: None,
            tenant: Some("acme".into()),
            ca_cert: None,
            client_cert: None,
            client_key: None,
            json: false,
        };
        let listing = Listing {
            filter: TaskFilter::new(
                [TaskStatus::Working, TaskStatus::Failed],
                ToolName::parse("hash").ok(),
            ),
            page_size: Some(10),
        };
        assert_eq!(
            next_page_command(&args, &listing, "CUR"),
            r"taskstore list --tenant acme --session 'it'\''s' --status failed,working --tool hash --page-size 10 --cursor CUR"
        );
    }
}

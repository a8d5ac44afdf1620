//! Live updates: one server-sent event stream per open page, fed by the
//! change feed of the viewer's tenant (changes made on any replica), with
//! the changes coalesced per connection (a task changing ten times in a
//! moment is sent once, as it is now). New tasks are not changes on the
//! feed (a create notifies nobody, so that creating stays cheap): the stream
//! looks for tasks newer than the newest it knows once a second, with the
//! page's filters, one bounded query. Streams count against the tenant's
//! open streams like waiting calls on gRPC and `/mcp`, end when the
//! dashboard stops, and end with `logout` once the session is no longer
//! valid (a revoked key).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

use super::Board;
use super::params::TaskQuery;
use super::render::status;
use super::viewer::Viewer;
use crate::domain::{Operation, Scope, SearchPage, SearchPosition, Task, TaskId};
use crate::store::Followed;

/// Changes gathered before they are sent together.
const COALESCE: Duration = Duration::from_millis(200);
/// How often new tasks are looked for, and the session checked again.
const LOOK_EVERY: Duration = Duration::from_secs(1);
const CHECK_SESSION_EVERY: Duration = Duration::from_secs(3);
/// New tasks sent per look at most (more: the page is told to reload).
const NEW_PER_LOOK: u32 = 20;

pub async fn events(
    State(board): State<Arc<Board>>,
    headers: HeaderMap,
    viewer: Result<Viewer, Response>,
    RawQuery(raw): RawQuery,
) -> Response {
    // An event stream cannot show a page: a refusal is its status alone.
    let viewer = match viewer {
        Ok(viewer) if viewer.may(Operation::ListTasks) => viewer,
        _ => return (StatusCode::UNAUTHORIZED, "log in again").into_response(),
    };
    let query = match TaskQuery::parse(raw.as_deref().unwrap_or("")) {
        Ok(query) => query,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let slot = match board.admissions.hold_waiting(&viewer.tenant) {
        Ok(slot) => slot,
        Err(refused) => {
            return (StatusCode::TOO_MANY_REQUESTS, refused.message).into_response();
        }
    };
    let scope = Scope {
        tenant: viewer.tenant.clone(),
        session: None,
    };
    let follow = match board.store.follow_tasks(&scope).await {
        Ok(follow) => follow,
        Err(err) => return (StatusCode::SERVICE_UNAVAILABLE, err.to_string()).into_response(),
    };
    let (sender, receiver) = mpsc::channel::<Event>(16);
    tokio::spawn(async move {
        let _slot = slot;
        feed(&board, &headers, &viewer, &query, follow, &sender).await;
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(receiver).map(Ok::<_, Infallible>);
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Sends events until the page goes away, the session ends, or the
/// dashboard stops.
async fn feed(
    board: &Board,
    headers: &HeaderMap,
    viewer: &Viewer,
    query: &TaskQuery,
    mut follow: crate::store::TaskFollow,
    sender: &mpsc::Sender<Event>,
) {
    let selectable = viewer.may(Operation::CancelTask);
    // Looking for new tasks starts here, even when none matches yet.
    let since = chrono::Utc::now();
    let mut newest = newest_now(board, viewer, query).await;
    let mut pending: BTreeMap<TaskId, Task> = BTreeMap::new();
    let mut look = tokio::time::interval(LOOK_EVERY);
    let mut check = tokio::time::interval(CHECK_SESSION_EVERY);
    let flush = tokio::time::sleep(COALESCE);
    tokio::pin!(flush);
    let mut flushing = false;
    if sender
        .send(Event::default().event("ready").data("live"))
        .await
        .is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            () = board.shutdown.cancelled() => return,
            () = sender.closed() => return,
            item = follow.next() => match item {
                Some(Followed::Changed(changed)) => {
                    pending.insert(changed.task.task_id.clone(), changed.task.clone());
                    if !flushing {
                        flush.as_mut().reset(tokio::time::Instant::now() + COALESCE);
                        flushing = true;
                    }
                }
                Some(Followed::Resync) => {
                    if sender.send(Event::default().event("resync").data("changes were missed")).await.is_err() { return; }
                }
                None => return,
            },
            () = &mut flush, if flushing => {
                flushing = false;
                for task in std::mem::take(&mut pending).into_values() {
                    if sender.send(changed_event(board.base(), &task, selectable)).await.is_err() { return; }
                }
            }
            _ = look.tick() => {
                match look_for_new(board, viewer, query, newest.as_ref(), since).await {
                    Some(NewTasks::Found(tasks)) => {
                        for task in tasks.iter().rev() {
                            if sender.send(created_event(board.base(), task, selectable)).await.is_err() { return; }
                        }
                        if let Some(task) = tasks.first() { newest = Some(SearchPosition::of(task)); }
                    }
                    Some(NewTasks::TooMany) => {
                        if sender.send(Event::default().event("resync").data("many new tasks")).await.is_err() { return; }
                        newest = newest_now(board, viewer, query).await;
                    }
                    None => {}
                }
            }
            _ = check.tick() => {
                if board.viewer(headers).await.is_err() {
                    let _ = sender.send(Event::default().event("logout").data("the session ended")).await;
                    return;
                }
            }
        }
    }
}

enum NewTasks {
    Found(Vec<Task>),
    TooMany,
}

/// The newest matching task now, where looking for new ones starts.
async fn newest_now(board: &Board, viewer: &Viewer, query: &TaskQuery) -> Option<SearchPosition> {
    board
        .insights
        .search_tasks(
            &viewer.tenant,
            &query.search,
            &SearchPage::new(Some(1), None),
        )
        .await
        .ok()
        .and_then(|results| results.tasks.first().map(SearchPosition::of))
}

/// Matching tasks newer than `newest`, newest first.
async fn look_for_new(
    board: &Board,
    viewer: &Viewer,
    query: &TaskQuery,
    newest: Option<&SearchPosition>,
    since: chrono::DateTime<chrono::Utc>,
) -> Option<NewTasks> {
    let mut search = query.search.clone();
    let floor = newest.map_or(since, |newest| newest.created_at.max(since));
    search.created_from = Some(search.created_from.map_or(floor, |from| from.max(floor)));
    let results = board
        .insights
        .search_tasks(
            &viewer.tenant,
            &search,
            &SearchPage::new(Some(NEW_PER_LOOK), None),
        )
        .await
        .ok()?;
    let fresh: Vec<Task> = results
        .tasks
        .into_iter()
        .filter(|task| {
            newest
                .is_none_or(|newest| !newest.is_before(task) && SearchPosition::of(task) != *newest)
        })
        .collect();
    if fresh.is_empty() {
        None
    } else if fresh.len() >= NEW_PER_LOOK as usize {
        Some(NewTasks::TooMany)
    } else {
        Some(NewTasks::Found(fresh))
    }
}

fn payload(base: &str, task: &Task, selectable: bool) -> String {
    json!({
        "id": task.task_id.as_str(),
        "status": task.status.as_str(),
        "message": task.status_message.as_deref().unwrap_or(""),
        "statusHtml": status(task.status).into_string(),
        "row": super::pages::tasks::row(base, task, selectable).into_string(),
    })
    .to_string()
}

fn changed_event(base: &str, task: &Task, selectable: bool) -> Event {
    Event::default()
        .event("task")
        .data(payload(base, task, selectable))
}

fn created_event(base: &str, task: &Task, selectable: bool) -> Event {
    Event::default()
        .event("created")
        .data(payload(base, task, selectable))
}

//! The change feed over PostgreSQL LISTEN/NOTIFY: a trigger (migrations
//! 0002, 0003, 0012, 0015) notifies task changes, with the task; one
//! listening connection per replica turns the notifications into
//! in-process events (`payload.rs`). Claims and status changes that
//! no other replica listens for are not notified: the replica that made
//! them tells its subscribers itself (`quiet.rs`). (Outbox inserts no
//! longer notify: migration 0008.)

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgNotification};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::payload::{Notification, parse_notification};
use super::registrations::LISTENER_APPLICATION;
use crate::domain::{JsonObject, TaskResult};
use crate::store::changes::{ChangeFeed, News, TaskChange};
use crate::store::statements::sql;

const TASK_CHANNEL: &str = "taskstore_task_changed";
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(5);

/// Listens until `stop` fires, reconnecting with backoff. After every
/// (re)connection it tells everyone to re-read (`Resync`), because
/// notifications sent while it was away are lost. The returned receiver
/// completes once the first connection listens.
pub(in crate::store::postgres) fn spawn(
    pool: PgPool,
    feed: ChangeFeed,
    stop: CancellationToken,
) -> oneshot::Receiver<()> {
    let (listening, first_connection) = oneshot::channel();
    let mut listening = Some(listening);
    tokio::spawn(async move {
        let mut delay = Duration::from_millis(100);
        loop {
            // The service closes the pool on shutdown: nothing to listen for.
            if pool.is_closed() {
                return;
            }
            let connected = tokio::select! {
                () = stop.cancelled() => return,
                connected = connect(&pool) => connected,
            };
            let (mut listener, schema) = match connected {
                Ok(connected) => connected,
                Err(err) => {
                    tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "change feed cannot listen; retrying");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                    continue;
                }
            };
            delay = Duration::from_millis(100);
            feed.publish(TaskChange::Resync);
            if let Some(listening) = listening.take() {
                // Nobody waiting any more is fine.
                let _ = listening.send(());
            }
            loop {
                let received = tokio::select! {
                    () = stop.cancelled() => return,
                    received = listener.try_recv() => received,
                };
                match received {
                    Ok(Some(notification)) => route(&notification, &schema, &feed),
                    Ok(None) => {
                        tracing::warn!("change feed connection lost; reconnecting");
                        break;
                    }
                    Err(_) if pool.is_closed() => return,
                    Err(err) => {
                        tracing::warn!(error = %err, "change feed failed; reconnecting");
                        break;
                    }
                }
            }
        }
    });
    first_connection
}

/// A listening connection, and the schema whose changes it hears.
async fn connect(pool: &PgPool) -> Result<(PgListener, String), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // The name tells other replicas this listener registers the tenants it
    // wants to hear of (`registrations.rs`).
    sqlx::query(&format!("SET application_name = '{LISTENER_APPLICATION}'"))
        .execute(&mut listener)
        .await?;
    // What the payloads of this deployment's changes name (migration
    // 0026): NOTIFY reaches every schema of the database.
    let schema: String = sqlx::query_scalar(sql!("SELECT current_schema()::text"))
        .fetch_one(&mut listener)
        .await?;
    listener.listen(TASK_CHANNEL).await?;
    Ok((listener, schema))
}

fn route(notification: &PgNotification, schema: &str, feed: &ChangeFeed) {
    match notification.channel() {
        TASK_CHANNEL => publish(notification.payload(), schema, feed),
        other => tracing::debug!(channel = other, "ignoring notification"),
    }
}

/// Publishes a task change. One that ends a task with the result it
/// carries is handed over to the task's subscribers (a waiting call answers
/// without reading) and published to its tenant's followers.
fn publish(payload: &str, schema: &str, feed: &ChangeFeed) {
    let Some(notification) = parse_notification(payload) else {
        tracing::warn!(payload, "malformed task change notification");
        return;
    };
    // Another deployment's, in another schema of the same database.
    if !notification.is_for(schema) {
        return;
    }
    let Notification { change, result, .. } = notification;
    if let (
        Some(result),
        TaskChange::Changed {
            tenant,
            task_id,
            news: News::Task(changed),
        },
    ) = (result, &change)
        && changed.task.status.is_terminal()
        && feed.has_task_subscribers(tenant, task_id)
        && let Ok(result) = JsonObject::parse(result)
    {
        let ended = TaskResult {
            task: changed.task.clone(),
            result,
        };
        let (tenant, task_id) = (tenant.clone(), task_id.clone());
        feed.publish_to_tenant_followers(change);
        feed.hand_over(&tenant, &task_id, ended);
        return;
    }
    feed.publish(change);
}

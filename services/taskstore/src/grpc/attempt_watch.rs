//! `TaskExecution.WatchAttempts`: one stream carries the news of all of a
//! worker's running attempts (a cancellation, another end, a change a tool
//! waiting for an answer wants), instead of a WatchTask per attempt. Each
//! followed attempt is a watch of its task over the change feed, which
//! reads the task only when a change does not carry it (or it may have
//! expired): a quietly running attempt costs no periodic work.

use std::sync::Arc;

use std::collections::HashMap;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::caller::StreamTenants;
use super::convert::stop_reason_to_pb;
use super::parse::lease_token;
use super::pb;
use crate::domain::{Renewal, Scope, StopReason, Task, TaskId, TaskStatus};
use crate::error::StoreError;
use crate::store::execution::ExecutionStore;
use crate::store::{TaskStore, TaskWatch};

/// Most attempts one stream follows at once.
pub(super) const MAX_FOLLOWED: usize = 100_000;

/// News waiting to be sent before the stream applies back-pressure.
const NEWS_BUFFER: usize = 256;

/// (tenant, task id).
type Followed = (String, String);

/// What a stream needs to follow attempts.
pub(super) struct AttemptWatch {
    pub tasks: Arc<dyn TaskStore>,
    pub execution: Arc<dyn ExecutionStore>,
    pub tenants: StreamTenants,
}

impl AttemptWatch {
    /// Serves one stream until the worker closes it (or breaks it).
    pub(super) fn serve(
        self,
        mut inbound: Streaming<pb::WatchAttemptsRequest>,
    ) -> ReceiverStream<Result<pb::AttemptNews, Status>> {
        let (sender, receiver) = mpsc::channel(NEWS_BUFFER);
        tokio::spawn(async move {
            let (items, mut changed) = mpsc::channel(NEWS_BUFFER);
            let mut followed = Watches {
                running: HashMap::new(),
                items,
            };
            loop {
                tokio::select! {
                    () = sender.closed() => return,
                    message = inbound.message() => {
                        let Ok(Some(request)) = message else { return };
                        if let Err(status) = self.apply(request, &mut followed, &sender).await {
                            let _ = sender.send(Err(status)).await;
                            return;
                        }
                    }
                    Some((key, item)) = changed.recv() => {
                        let Some(news) = news_of(&key, item) else { continue };
                        if news.stop.is_some() {
                            followed.remove(&key);
                        }
                        if sender.send(Ok(news)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        ReceiverStream::new(receiver)
    }

    /// Follows and forgets what one message says.
    async fn apply(
        &self,
        request: pb::WatchAttemptsRequest,
        followed: &mut Watches,
        sender: &mpsc::Sender<Result<pb::AttemptNews, Status>>,
    ) -> Result<(), Status> {
        for attempt in request.unfollow {
            let tenant = self.tenants.tenant(&attempt.tenant_id)?;
            followed.remove(&(tenant.as_str().to_owned(), attempt.task_id));
        }
        for attempt in request.follow {
            if followed.len() >= MAX_FOLLOWED {
                return Err(Status::resource_exhausted(format!(
                    "one stream follows at most {MAX_FOLLOWED} attempts"
                )));
            }
            let tenant = self.tenants.tenant(&attempt.tenant_id)?;
            super::service::record_task_id(&attempt.task_id);
            let task_id = TaskId::parse(&attempt.task_id)
                .map_err(|err| StoreError::invalid("task_id", err))?;
            let lease = lease_token(&attempt.lease_token)?;
            let key = (tenant.as_str().to_owned(), task_id.as_str().to_owned());
            // The lease must be the task's current one, as for WatchTask;
            // checked, not renewed (the session keeps the attempt alive).
            let renewal = self.execution.check(&tenant, &task_id, &lease).await?;
            let scope = Scope {
                tenant,
                session: None,
            };
            let stop = match renewal {
                Renewal::Stop(reason) => reason,
                Renewal::KeepRunning => match self.tasks.watch_task(&scope, &task_id).await {
                    Ok(watch) => {
                        followed.insert(key, watch);
                        continue;
                    }
                    Err(StoreError::NotFound) => StopReason::Gone,
                    Err(err) => return Err(err.into()),
                },
            };
            if sender.send(Ok(stopped(&key, stop))).await.is_err() {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// The watches of one stream's followed attempts, each forwarding its
/// items into one channel: a task per watch, woken only by its own task's
/// changes (polling a map of every watch on each wake would cost the
/// stream's whole size per change).
struct Watches {
    running: HashMap<Followed, AbortHandle>,
    items: mpsc::Sender<(Followed, Result<Task, StoreError>)>,
}

impl Watches {
    fn len(&self) -> usize {
        self.running.len()
    }

    fn insert(&mut self, key: Followed, mut watch: TaskWatch) {
        let items = self.items.clone();
        let forwarded = key.clone();
        let forwarder = tokio::spawn(async move {
            while let Some(item) = watch.next().await {
                if items.send((forwarded.clone(), item)).await.is_err() {
                    return;
                }
            }
        });
        if let Some(replaced) = self.running.insert(key, forwarder.abort_handle()) {
            replaced.abort();
        }
    }

    fn remove(&mut self, key: &Followed) {
        if let Some(running) = self.running.remove(key) {
            running.abort();
        }
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for running in self.running.values() {
            running.abort();
        }
    }
}

/// What a followed task's watch says to its worker; `None`: nothing.
fn news_of(key: &Followed, item: Result<Task, StoreError>) -> Option<pb::AttemptNews> {
    match item {
        Ok(task) => match task.status {
            TaskStatus::Cancelled => Some(stopped(key, StopReason::Cancelled)),
            TaskStatus::Completed | TaskStatus::Failed => Some(stopped(key, StopReason::Finished)),
            TaskStatus::Working | TaskStatus::InputRequired => Some(pb::AttemptNews {
                tenant_id: key.0.clone(),
                task_id: key.1.clone(),
                stop: None,
            }),
        },
        Err(StoreError::NotFound) => Some(stopped(key, StopReason::Gone)),
        // The watch retries on its own.
        Err(_) => None,
    }
}

fn stopped(key: &Followed, reason: StopReason) -> pb::AttemptNews {
    pb::AttemptNews {
        tenant_id: key.0.clone(),
        task_id: key.1.clone(),
        stop: Some(stop_reason_to_pb(reason).into()),
    }
}

//! One WatchAttempts stream for all of the worker's running attempts: it
//! tells each attempt to stop (cancelled, finished elsewhere, gone) within
//! moments, and wakes a tool waiting for an answer when its task changes,
//! instead of a WatchTask stream per attempt. A broken stream is opened
//! again and follows every running attempt again. Against a service
//! without the call, attempts watch their tasks one by one, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use taskstore_proto::credentials::BearerToken;
use taskstore_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use pb::task_execution_client::TaskExecutionClient;

use crate::control::{Control, Stop};

type Client = TaskExecutionClient<InterceptedService<Channel, BearerToken>>;

/// How long a broken stream waits before it is opened again.
const REOPEN_AFTER: Duration = Duration::from_millis(500);
/// Most attempts named in one message.
const MAX_PER_MESSAGE: usize = 1000;
/// Messages of follows and unfollows queued while the stream is slow to take
/// them (a new attempt waits for room rather than being dropped).
const CHANGES_BUFFERED: usize = 64;

/// (tenant, task id).
type Key = (String, String);

struct Followed {
    lease_token: String,
    control: Arc<Control>,
}

#[derive(Default)]
struct Shared {
    attempts: Mutex<HashMap<Key, Followed>>,
    /// Fires when the service has no WatchAttempts: attempts watch their
    /// tasks themselves.
    unsupported: CancellationToken,
}

/// The worker's followed attempts, and the stream that follows them.
#[derive(Clone)]
pub(crate) struct Followers {
    shared: Arc<Shared>,
    changes: mpsc::UnboundedSender<Change>,
    receiver: Arc<Mutex<Option<mpsc::UnboundedReceiver<Change>>>>,
}

enum Change {
    Follow(Key),
    Unfollow(Key),
}

/// Follows one attempt until dropped.
pub(crate) struct Following {
    key: Key,
    followers: Followers,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.followers.locked().remove(&self.key);
        let _ = self
            .followers
            .changes
            .send(Change::Unfollow(self.key.clone()));
    }
}

impl Default for Followers {
    fn default() -> Self {
        let (changes, receiver) = mpsc::unbounded_channel();
        Self {
            shared: Arc::default(),
            changes,
            receiver: Arc::new(Mutex::new(Some(receiver))),
        }
    }
}

impl Followers {
    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Followed>> {
        self.shared
            .attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Fires when attempts must watch their tasks themselves.
    pub(crate) fn unsupported(&self) -> CancellationToken {
        self.shared.unsupported.clone()
    }

    /// Follows the attempt holding `lease_token` on the task; its news
    /// goes to `control` until the returned guard is dropped.
    pub(crate) fn follow(
        &self,
        tenant_id: &str,
        task_id: &str,
        lease_token: &str,
        control: Arc<Control>,
    ) -> Following {
        let key = (tenant_id.to_owned(), task_id.to_owned());
        self.locked().insert(
            key.clone(),
            Followed {
                lease_token: lease_token.to_owned(),
                control,
            },
        );
        let _ = self.changes.send(Change::Follow(key.clone()));
        Following {
            key,
            followers: self.clone(),
        }
    }

    /// Keeps the stream open until `stop` fires.
    pub(crate) async fn keep(self, mut client: Client, stop: CancellationToken) {
        let taken = self
            .receiver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut changes) = taken else { return };
        while !stop.is_cancelled() {
            // Everything followed now goes in the new stream's first
            // messages; changes queued before are in it already.
            while changes.try_recv().is_ok() {}
            let (outbound, requests) = opening_with(&self.everything());
            let opened = tokio::select! {
                () = stop.cancelled() => return,
                opened = client.watch_attempts(ReceiverStream::new(requests)) => opened,
            };
            match opened {
                Ok(news) => {
                    tracing::debug!("following running attempts");
                    self.serve(&mut changes, &outbound, news.into_inner(), &stop)
                        .await;
                }
                Err(status) if status.code() == Code::Unimplemented => {
                    tracing::info!(
                        "the service has no WatchAttempts; attempts watch their tasks one by one"
                    );
                    self.shared.unsupported.cancel();
                    return;
                }
                Err(status) => {
                    tracing::debug!(error = %status.message(), "cannot follow attempts now; retrying");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(REOPEN_AFTER) => {}
            }
        }
    }

    /// Passes changes out and news in until the stream breaks or `stop`.
    async fn serve(
        &self,
        changes: &mut mpsc::UnboundedReceiver<Change>,
        outbound: &mpsc::Sender<pb::WatchAttemptsRequest>,
        mut news: tonic::Streaming<pb::AttemptNews>,
        stop: &CancellationToken,
    ) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                change = changes.recv() => {
                    let Some(change) = change else { return };
                    let mut batch = vec![change];
                    while batch.len() < MAX_PER_MESSAGE {
                        match changes.try_recv() {
                            Ok(change) => batch.push(change),
                            Err(_) => break,
                        }
                    }
                    if outbound.send(self.message(batch)).await.is_err() {
                        return;
                    }
                }
                item = news.message() => match item {
                    Ok(Some(item)) => self.deliver(item),
                    Ok(None) => return,
                    Err(status) => {
                        tracing::debug!(error = %status.message(), "attempt stream broke; reopening");
                        return;
                    }
                },
            }
        }
    }

    /// One message saying `batch`; a follow of an attempt that ended since
    /// is left out.
    fn message(&self, batch: Vec<Change>) -> pb::WatchAttemptsRequest {
        let attempts = self.locked();
        let mut request = pb::WatchAttemptsRequest::default();
        for change in batch {
            match change {
                Change::Follow(key) => {
                    if let Some(followed) = attempts.get(&key) {
                        request.follow.push(followed_pb(&key, followed));
                    }
                }
                Change::Unfollow((tenant_id, task_id)) => {
                    request.unfollow.push(pb::FollowedAttempt {
                        tenant_id,
                        task_id,
                        lease_token: String::new(),
                    });
                }
            }
        }
        request
    }

    fn everything(&self) -> Vec<pb::FollowedAttempt> {
        self.locked()
            .iter()
            .map(|(key, followed)| followed_pb(key, followed))
            .collect()
    }

    /// Hands one piece of news to its attempt.
    fn deliver(&self, news: pb::AttemptNews) {
        let key = (news.tenant_id, news.task_id);
        let attempts = self.locked();
        let Some(followed) = attempts.get(&key) else {
            return;
        };
        match news.stop {
            Some(reason) => {
                let reason =
                    pb::StopReason::try_from(reason).unwrap_or(pb::StopReason::Unspecified);
                followed.control.stop(Stop::from(reason));
            }
            None => followed.control.changed.notify_waiters(),
        }
    }
}

fn followed_pb(key: &Key, followed: &Followed) -> pb::FollowedAttempt {
    pb::FollowedAttempt {
        tenant_id: key.0.clone(),
        task_id: key.1.clone(),
        lease_token: followed.lease_token.clone(),
    }
}

/// A new stream's requests, holding every attempt followed now in its first
/// messages: the channel has room for all of them (nothing reads it before
/// the stream opens) and for the changes after.
fn opening_with(
    followed: &[pb::FollowedAttempt],
) -> (
    mpsc::Sender<pb::WatchAttemptsRequest>,
    mpsc::Receiver<pb::WatchAttemptsRequest>,
) {
    let first = followed.chunks(MAX_PER_MESSAGE);
    let (outbound, requests) = mpsc::channel(first.len() + CHANGES_BUFFERED);
    for chunk in first {
        // Cannot fail: the channel was sized for these, and its receiver is here.
        let _ = outbound.try_send(pb::WatchAttemptsRequest {
            follow: chunk.to_vec(),
            unfollow: Vec::new(),
        });
    }
    (outbound, requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reopened_stream_follows_every_attempt_however_many() {
        let followed: Vec<pb::FollowedAttempt> = (0..70_001)
            .map(|i| pb::FollowedAttempt {
                task_id: format!("{i:032x}"),
                ..Default::default()
            })
            .collect();
        let (_outbound, mut requests) = opening_with(&followed);
        let mut sent = Vec::new();
        while let Ok(request) = requests.try_recv() {
            assert!(request.follow.len() <= MAX_PER_MESSAGE);
            sent.extend(request.follow);
        }
        assert_eq!(sent, followed);
    }
}

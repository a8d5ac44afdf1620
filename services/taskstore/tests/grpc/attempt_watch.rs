//! WatchAttempts: one stream follows many attempts. A cancellation reaches
//! the stream as a stop within moments, an attempt whose lease is not the
//! task's current one is told to stop at once, an unfollowed attempt says
//! nothing more, and a malformed follow ends the stream with
//! INVALID_ARGUMENT, changing nothing.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::*;

async fn dispatched(store: &mut TaskStoreClient<Channel>) -> String {
    store
        .create_task(dispatch_request())
        .await
        .expect("create")
        .into_inner()
        .task_id
}

fn follow(task_id: &str, lease_token: &str) -> pb::FollowedAttempt {
    pb::FollowedAttempt {
        tenant_id: String::new(),
        task_id: task_id.into(),
        lease_token: lease_token.into(),
    }
}

async fn next_news(news: &mut tonic::Streaming<pb::AttemptNews>) -> pb::AttemptNews {
    tokio::time::timeout(Duration::from_secs(5), news.message())
        .await
        .expect("news within 5 s")
        .expect("the stream is open")
        .expect("news")
}

#[tokio::test]
async fn one_stream_tells_each_followed_attempt_when_to_stop() {
    let (mut store, channel, _) = server(SMALL_LIMITS).await;
    let mut execution = pb::task_execution_client::TaskExecutionClient::new(channel);
    let mut leases = Vec::new();
    for _ in 0..3 {
        let id = dispatched(&mut store).await;
        let lease = execution
            .claim_task(pb::ClaimTaskRequest {
                task_id: id.clone(),
                generation: 1,
                worker_id: "w".into(),
                ..Default::default()
            })
            .await
            .expect("claim")
            .into_inner()
            .lease_token;
        leases.push((id, lease));
    }
    let (outbound, requests) = mpsc::channel(8);
    let mut news = execution
        .watch_attempts(ReceiverStream::new(requests))
        .await
        .expect("WatchAttempts")
        .into_inner();
    let (cancelled, quiet, forgotten) = (&leases[0], &leases[1], &leases[2]);
    outbound
        .send(pb::WatchAttemptsRequest {
            follow: vec![
                follow(&cancelled.0, &cancelled.1),
                follow(&quiet.0, &quiet.1),
                follow(&forgotten.0, &forgotten.1),
                follow(&quiet.0, "not-the-lease"),
            ],
            unfollow: Vec::new(),
        })
        .await
        .expect("send");
    // Each followed attempt's first news is its task as it is: running.
    let mut first = Vec::new();
    for _ in 0..4 {
        first.push(next_news(&mut news).await);
    }
    let stopped: Vec<_> = first.iter().filter(|n| n.stop.is_some()).collect();
    assert_eq!(stopped.len(), 1, "{first:?}");
    assert_eq!(stopped[0].task_id, quiet.0);
    assert_eq!(stopped[0].stop, Some(pb::StopReason::LeaseLost as i32));

    outbound
        .send(pb::WatchAttemptsRequest {
            follow: Vec::new(),
            unfollow: vec![follow(&forgotten.0, "")],
        })
        .await
        .expect("send");
    // Settle the unfollow before the cancellations.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for id in [&forgotten.0, &cancelled.0] {
        store
            .cancel_task(pb::CancelTaskRequest {
                task_id: id.clone(),
                session_id: None,
            })
            .await
            .expect("cancel");
    }
    let stop = next_news(&mut news).await;
    assert_eq!(
        stop.task_id, cancelled.0,
        "the unfollowed attempt says nothing"
    );
    assert_eq!(stop.stop, Some(pb::StopReason::Cancelled as i32));

    // A malformed follow ends the stream, naming the field.
    outbound
        .send(pb::WatchAttemptsRequest {
            follow: vec![follow("a b", &quiet.1)],
            unfollow: Vec::new(),
        })
        .await
        .expect("send");
    let status = tokio::time::timeout(Duration::from_secs(5), news.message())
        .await
        .expect("an answer within 5 s")
        .expect_err("the stream ends");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("task_id"), "{status:?}");
}

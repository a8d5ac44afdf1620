//! The `watch` scenario: many tasks in flight and many open WatchTask
//! streams, while the clients keep changing the watched tasks. It measures
//! how fast a change reaches its watcher; `benches/run.sh` reads the
//! service's memory meanwhile.

use std::time::{Duration, Instant};

use taskstore_proto::v1 as pb;
use tokio::task::JoinSet;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use super::prepare::Prepared;
use super::stats::{Recorded, samples};
use super::walk::{Walk, unix_micros};
use super::{BenchError, Shared};

/// Status messages the clients write: this prefix, then the send time in µs
/// since the Unix epoch, which the watcher turns into a delivery latency.
const STAMP: &str = "bench update at ";

/// The open streams, each drained by a task of its own.
pub(crate) struct Watchers {
    streams: JoinSet<Result<Recorded, BenchError>>,
    stop: CancellationToken,
}

impl Watchers {
    /// Opens one stream per task in `task_ids`, spread over the shared
    /// connections.
    pub(crate) async fn open(shared: &Shared, task_ids: &[String]) -> Result<Self, BenchError> {
        eprintln!("[bench] opening {} WatchTask streams", task_ids.len());
        let stop = CancellationToken::new();
        let mut streams = JoinSet::new();
        for (index, task_id) in task_ids.iter().enumerate() {
            let mut client = shared.client(index);
            let started = Instant::now();
            let request = pb::WatchTaskRequest {
                lease_token: None,
                task_id: task_id.clone(),
                session_id: None,
            };
            let stream = client.watch_task(request).await?.into_inner();
            let opened = started.elapsed();
            let stop = stop.clone();
            streams.spawn(async move {
                let mut recorded = Recorded::new();
                samples(&mut recorded, "watch_open").record(opened);
                drain(stream, stop, &mut recorded).await?;
                Ok(recorded)
            });
        }
        Ok(Self { streams, stop })
    }

    /// Closes every stream and returns what the watchers measured; fails if
    /// any stream ended before it was closed.
    pub(crate) async fn close(self) -> Result<Recorded, BenchError> {
        self.stop.cancel();
        let mut recorded = Recorded::new();
        for outcome in self.streams.join_all().await {
            super::stats::merge(&mut recorded, outcome?);
        }
        Ok(recorded)
    }
}

async fn drain(
    mut stream: tonic::Streaming<pb::Task>,
    stop: CancellationToken,
    recorded: &mut Recorded,
) -> Result<(), BenchError> {
    loop {
        let item = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            item = stream.next() => item,
        };
        let task = match item {
            Some(task) => task?,
            None => return Err(BenchError::StreamEnded),
        };
        let sent = task
            .status_message
            .as_deref()
            .and_then(|message| message.strip_prefix(STAMP))
            .and_then(|micros| micros.parse::<u64>().ok());
        if let Some(sent) = sent {
            samples(recorded, "watch_delivery").record_micros(unix_micros().saturating_sub(sent));
        }
    }
}

/// One client: changes random watched tasks (working → working with a new
/// message) as fast as the service answers.
pub(crate) async fn client(
    shared: &Shared,
    prepared: &Prepared,
    index: usize,
    recorded: &mut Recorded,
) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let watched = &prepared.task_ids[..prepared.watched.min(prepared.task_ids.len())];
    if watched.is_empty() {
        return Ok(());
    }
    let mut walk = Walk::new(index);
    while !shared.finished() {
        let task_id = watched[walk.next_below(watched.len() as u64) as usize].clone();
        let started = Instant::now();
        client
            .update_task_status(pb::UpdateTaskStatusRequest {
                task_id,
                status: pb::TaskStatus::Working.into(),
                status_message: Some(format!("{STAMP}{}", unix_micros())),
                session_id: None,
                lease_token: None,
            })
            .await?;
        samples(recorded, "update").record(started.elapsed());
        shared.count_one();
        // The streams are the subject, not the update rate: leave the
        // service room to deliver.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

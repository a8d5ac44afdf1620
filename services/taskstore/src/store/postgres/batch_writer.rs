//! One writer task that gathers what callers have queued and handles it as
//! one batch (one statement, one commit), then answers each caller. Under
//! load many operations share a commit and a round trip; at rest a batch is
//! one operation, at the cost of one hop through a channel. Used by creates
//! (`group_commit`), claims (`claim_batch`) and status changes
//! (`transition_batch`).
//!
//! # Plans
//! A statement that finds its rows by the arrays it binds (a batch of claims
//! or of status changes, the outbox rows of a batch of jobs) is sent unnamed
//! (`.persistent(false)`): PostgreSQL plans each run for its arrays' lengths
//! and keeps no plan. A cached plan would be made for arrays of unknown length
//! (a hash join over a sequential scan of `tasks` on a table of a few
//! megabytes, kept as it grows). Planning costs once per batch. A batch of one
//! binds plain values and may keep its plan (`plans.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;

use tokio::sync::{mpsc, oneshot};

use super::error::store_error;
use crate::error::StoreError;

/// One caller's request in a batch, and where its answer goes: the row its
/// request made or changed, `None` when it changed nothing (the caller
/// finds out why), or the batch's error.
#[derive(Debug)]
pub(super) struct Pending<Q, R> {
    pub request: Q,
    pub reply: oneshot::Sender<Result<Option<R>, StoreError>>,
}

/// Queues `request` with the writer behind `writer` and waits for its
/// answer (UNAVAILABLE once the store is shutting down).
pub(super) async fn submit<Q, R>(
    writer: &mpsc::Sender<Pending<Q, R>>,
    request: Q,
) -> Result<Option<R>, StoreError> {
    let stopped = || StoreError::Unavailable("the store is shutting down".into());
    let (reply, answer) = oneshot::channel();
    writer
        .send(Pending { request, reply })
        .await
        .map_err(|_| stopped())?;
    answer.await.map_err(|_| stopped())?
}

/// Answers every caller of a batch from its statement's outcome: each the
/// row under its request's `key`, or all the same error.
pub(super) fn answer<Q, R, K: Eq + Hash>(
    batch: Vec<Pending<Q, R>>,
    outcome: Result<HashMap<K, R>, sqlx::Error>,
    key: impl Fn(Q) -> K,
) {
    match outcome {
        Ok(mut rows) => {
            for pending in batch {
                let row = rows.remove(&key(pending.request));
                let _ = pending.reply.send(Ok(row));
            }
        }
        Err(err) => {
            let err = store_error(err);
            for pending in batch {
                let _ = pending.reply.send(Err(err.clone()));
            }
        }
    }
}

/// Starts a writer for items of type `P`, at most `max_batch` per batch.
/// `split` sets apart items that must wait for the next batch (they are
/// handled first then); `run` handles a batch and answers its callers. The
/// writer ends when every sender is dropped.
pub(super) fn spawn<P, S, R, F>(max_batch: usize, split: S, mut run: R) -> mpsc::Sender<P>
where
    P: Send + 'static,
    S: Fn(Vec<P>) -> (Vec<P>, Vec<P>) + Send + 'static,
    R: FnMut(Vec<P>) -> F + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let (sender, mut receiver) = mpsc::channel::<P>(max_batch * 4);
    tokio::spawn(async move {
        let mut carried: Vec<P> = Vec::new();
        loop {
            let mut batch = std::mem::take(&mut carried);
            if batch.is_empty() {
                match receiver.recv().await {
                    Some(first) => batch.push(first),
                    None => return,
                }
            }
            while batch.len() < max_batch {
                match receiver.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let (now, later) = split(batch);
            carried = later;
            run(now).await;
        }
    });
    sender
}

/// A batch split in two: what goes now, and what waits for the next one.
pub(super) type Split<P> = (Vec<P>, Vec<P>);

/// Splits a batch so that it holds one request per `key`: the later ones
/// of a key wait for the next batch, so each sees the one before applied.
pub(super) fn one_per_key<Q, R, K: Eq + Hash>(
    batch: Vec<Pending<Q, R>>,
    key: impl Fn(&Q) -> K,
) -> Split<Pending<Q, R>> {
    let mut seen = std::collections::HashSet::new();
    batch
        .into_iter()
        .partition(|pending| seen.insert(key(&pending.request)))
}

/// For writers whose batches take any mix of items.
pub(super) fn nothing_waits<P>(batch: Vec<P>) -> (Vec<P>, Vec<P>) {
    (batch, Vec::new())
}

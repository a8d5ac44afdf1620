//! A replica's view of which tools have room, kept between relay passes:
//! the few-callers path stays as fast as a queue that takes everything
//! (a new job goes straight out while its tool's queue has room and no
//! backlog waits), and a tool whose queue is full keeps its backlog in the
//! store, where `domain::next_jobs` decides what goes next.
//!
//! What a tool's queue has room for is asked of the queue itself
//! (`JobPublisher::depth`): while nothing waits in it, a burst of
//! [`BURST_PER_CONSUMER`] per consumer (its consumers take them at once);
//! once jobs wait there, a budget of `QueueDepth::room`. Either is spent by
//! the jobs sent straight out, and asked again when spent or older than
//! [`REMEASURE`]. Every replica asks
//! the same queue, so replicas agree on the room without sharing memory;
//! the decision itself runs under the tool's lock in the store.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::{KeyCounts, KeyWindow, Turns, WaitingJob, next_jobs};
use crate::store::execution::JobPublisher;

/// How long a tool's measured room is trusted.
const REMEASURE: Duration = Duration::from_millis(100);

/// Jobs that go straight to a queue where nothing waits, per consumer,
/// before the queue is asked again. Unbounded, a burst of creates (a
/// tenant's flood at thousands a second) filled the queue for the 100 ms
/// the room is trusted, and another tenant's task then waited behind
/// hundreds of jobs in the broker, where no decision reorders them
/// (BENCHMARKS.md, the fairness benchmark).
const BURST_PER_CONSUMER: u32 = 32;

#[derive(Debug, Default)]
struct ToolGate {
    /// Jobs that may still go straight out (`None`: any number: the queue
    /// said it takes everything now).
    budget: Option<u32>,
    measured_at: Option<Instant>,
    /// Jobs of the tool wait in the store for room: new ones queue up
    /// behind them rather than overtaking them.
    backlog: bool,
    /// Its last decision left jobs waiting with room to spare: keys at
    /// their limit or rate, or paused, hold them (an ended task may free
    /// one).
    held_by_keys: bool,
    turns: Turns,
}

/// Per tool, as this replica last saw it.
#[derive(Debug, Default)]
pub struct DispatchGate {
    tools: Mutex<HashMap<String, ToolGate>>,
}

impl DispatchGate {
    fn with<T>(&self, tool: &str, f: impl FnOnce(&mut ToolGate) -> T) -> T {
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        f(tools.entry(tool.to_owned()).or_default())
    }

    /// How many of `count` new jobs of `tool` (the oldest) may go straight
    /// to its queue: none while a backlog waits, else as many as the queue
    /// had room for when last asked; the rest wait with the backlog.
    pub async fn admit_fresh(&self, tool: &str, count: u32, publisher: &dyn JobPublisher) -> u32 {
        let known = self.with(tool, |gate| {
            if gate.backlog {
                return Some(0);
            }
            let fresh = gate.measured_at.is_some_and(|at| at.elapsed() < REMEASURE);
            match gate.budget {
                _ if !fresh => None,
                None => Some(count),
                Some(budget) if budget >= count => {
                    gate.budget = Some(budget - count);
                    Some(count)
                }
                Some(_) => None,
            }
        });
        if let Some(known) = known {
            return known;
        }
        let depth = publisher.depth(tool).await;
        let room = self.room(tool, depth);
        // A burst is taken in part (the oldest go, the rest are decided);
        // the room left beside jobs already waiting in the queue, all or
        // nothing, so that a backlog is ordered by the decision alone.
        let burst = depth.is_some_and(|depth| depth.takes_everything());
        self.with(tool, |gate| {
            gate.measured_at = Some(Instant::now());
            match room {
                None => {
                    gate.budget = None;
                    count
                }
                Some(room) if room >= count => {
                    gate.budget = Some(room - count);
                    count
                }
                Some(room) => {
                    let admitted = if burst { room } else { 0 };
                    gate.budget = Some(room - admitted);
                    gate.backlog = true;
                    admitted
                }
            }
        })
    }

    /// How many jobs of `tool` the decision may send now, given what its
    /// queue holds: while no backlog waits and nothing waits in the queue,
    /// a burst of [`BURST_PER_CONSUMER`] per consumer before it is asked
    /// again (its consumers take them at once), else the queue's room.
    /// `None`: any number (the queue cannot tell).
    pub fn room(&self, tool: &str, depth: Option<crate::domain::QueueDepth>) -> Option<u32> {
        let backlog = self.with(tool, |gate| gate.backlog);
        match depth {
            None => None,
            Some(depth) if depth.takes_everything() && !backlog => {
                Some(depth.consumers.max(1).saturating_mul(BURST_PER_CONSUMER))
            }
            Some(depth) => Some(depth.room()),
        }
    }

    /// Whether any tool's backlog waits for its keys (a slot to free), as
    /// this replica last decided: only then does an ended task wake the
    /// relay.
    pub fn any_held_by_keys(&self) -> bool {
        let tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        tools.values().any(|gate| gate.backlog && gate.held_by_keys)
    }

    /// Its last decision left jobs held by their keys (see
    /// [`DispatchGate::any_held_by_keys`]).
    pub fn held_by_keys(&self, tool: &str, held: bool) {
        self.with(tool, |gate| gate.held_by_keys = held);
    }

    /// Whether any tool has a backlog this replica knows of.
    pub fn any_backlog(&self) -> bool {
        let tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        tools.values().any(|gate| gate.backlog)
    }

    /// Only `waiting` have jobs ready in the store: the others' backlogs
    /// are gone (another replica published them).
    pub fn only_waiting(&self, waiting: &[String]) {
        let waiting: HashSet<&str> = waiting.iter().map(String::as_str).collect();
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        for (tool, gate) in tools.iter_mut() {
            if !waiting.contains(tool.as_str()) {
                gate.backlog = false;
            }
        }
    }

    /// Which of `waiting` (jobs of `tool` ready in the store) go now, in
    /// the order they go, with each tenant's `weight` and each key's
    /// `counts`; the tenants' turns carry over to the next call.
    pub fn choose(
        &self,
        tool: &str,
        waiting: &[WaitingJob],
        room: usize,
        weight: &dyn Fn(&str) -> u32,
        counts: &mut KeyCounts,
        windows: &[KeyWindow],
    ) -> Vec<usize> {
        self.with(tool, |gate| {
            let chosen = next_jobs(waiting, room, &mut gate.turns, weight, counts);
            gate.turns.after_windows(waiting, &chosen, windows);
            chosen
        })
    }

    /// Where each tenant's read of `tool`'s fairness keys starts, as two
    /// columns (tenants, keys): `Turns::resumes`.
    pub fn resumes(&self, tool: &str) -> (Vec<String>, Vec<String>) {
        self.with(tool, |gate| gate.turns.resumes())
    }

    /// A decision for `tool` was taken: `more` jobs still wait for room.
    /// The budget is asked again before the next job goes straight out.
    pub fn decided(&self, tool: &str, more: bool) {
        self.with(tool, |gate| {
            gate.backlog = more;
            gate.budget = Some(0);
            gate.measured_at = None;
        });
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use taskstore_proto::jobs::JobMessage;

    use super::*;
    use crate::domain::QueueDepth;
    use crate::store::execution::{PublishError, Published};

    /// A queue as deep as given, for every tool.
    struct Room(Option<QueueDepth>);

    #[async_trait]
    impl JobPublisher for Room {
        async fn publish(&self, _job: &JobMessage) -> Result<Published, PublishError> {
            Ok(Published::Queued)
        }
        async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
            jobs.iter().map(|_| Ok(Published::Queued)).collect()
        }
        async fn depth(&self, _tool: &str) -> Option<QueueDepth> {
            self.0
        }
    }

    #[tokio::test]
    async fn fresh_jobs_go_out_while_the_room_lasts_then_queue_up_behind_the_backlog() {
        let gate = DispatchGate::default();
        // One job ready, four consumers: room for three.
        let three = Room(Some(QueueDepth {
            ready: 1,
            consumers: 4,
        }));
        assert_eq!(gate.admit_fresh("echo", 2, &three).await, 2);
        assert_eq!(gate.admit_fresh("echo", 1, &three).await, 1, "the budget");
        // Spent: the queue is asked again, and has no room for four.
        assert_eq!(gate.admit_fresh("echo", 4, &three).await, 0);
        assert!(gate.any_backlog(), "all four wait with the backlog");
        // Once the backlog is gone, jobs go straight out again.
        gate.decided("echo", false);
        assert_eq!(gate.admit_fresh("echo", 1, &three).await, 1);
        gate.decided("echo", true);
        assert_eq!(
            gate.admit_fresh("echo", 1, &three).await,
            0,
            "behind the backlog"
        );
        gate.only_waiting(&[]);
        assert!(!gate.any_backlog(), "published elsewhere");
        // A queue that cannot tell takes everything; one where nothing
        // waits, a burst per consumer before it is asked again.
        assert_eq!(gate.admit_fresh("other", 1000, &Room(None)).await, 1000);
        let empty = Room(Some(QueueDepth {
            ready: 0,
            consumers: 2,
        }));
        assert_eq!(
            gate.admit_fresh("third", 1000, &empty).await,
            2 * BURST_PER_CONSUMER
        );
        assert!(gate.any_backlog(), "the rest wait to be decided");
    }
}

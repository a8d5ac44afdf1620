//! The stop sequence as data: once told to stop, the service's parts stop
//! in order ([`Phase`]), and every phase waits only until the one deadline
//! that began with the signal (`--shutdown-grace`), never for a database
//! or a broker that does not answer. What a phase left running at its
//! deadline is dropped and logged, and the process exits.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The phases, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// `dev`'s workers give their running tasks back.
    EmbeddedWorkers,
    /// The gRPC server, `/mcp` and the dashboard finish their requests.
    Listeners,
    /// The relay, the reaper and the sweeps.
    BackgroundLoops,
    /// The store leaves its change-feed registrations and closes its pools.
    Store,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::EmbeddedWorkers => "embedded workers",
            Phase::Listeners => "listeners",
            Phase::BackgroundLoops => "background loops",
            Phase::Store => "store",
        }
    }
}

/// What a phase is still given when the deadline has passed: enough for a
/// database that answers to hear goodbye (registrations deleted,
/// connections closed), short enough that one that does not cannot hold
/// the process.
const LAST_WORDS: Duration = Duration::from_secs(1);

/// The deadline every phase of one stop shares.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stopping {
    deadline: Instant,
}

impl Stopping {
    /// Starts the clock: everything should be stopped `grace` from now.
    pub(super) fn begin(grace: Duration) -> Self {
        Self {
            deadline: Instant::now() + grace,
        }
    }

    /// When the listeners must have finished their requests.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Until when `phase` may run: the deadline, or [`LAST_WORDS`] from
    /// now when that is later.
    fn until(&self) -> Instant {
        self.deadline.max(Instant::now() + LAST_WORDS)
    }

    /// Runs `work` for `phase` until its time is up; `None` (logged) when
    /// it was dropped unfinished.
    pub(super) async fn run<F: Future>(&self, phase: Phase, work: F) -> Option<F::Output> {
        match tokio::time::timeout_at(self.until(), work).await {
            Ok(done) => Some(done),
            Err(_) => {
                tracing::warn!(
                    phase = phase.name(),
                    "shutting down: not done by the shutdown deadline; dropped"
                );
                None
            }
        }
    }

    /// Waits for `phase`'s tasks until its time is up, aborts those still
    /// running, and logs each that failed or panicked.
    pub(super) async fn join<T: Outcome>(&self, phase: Phase, tasks: Vec<JoinHandle<T>>) {
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        let joined = self
            .run(phase, async {
                for task in tasks {
                    match task.await {
                        Ok(outcome) => {
                            if let Some(err) = outcome.failure() {
                                tracing::error!(phase = phase.name(), error = %err, "a task of the phase failed")
                            }
                        }
                        Err(err) if err.is_cancelled() => {}
                        Err(err) => {
                            tracing::error!(phase = phase.name(), error = %err, "a task of the phase panicked")
                        }
                    }
                }
            })
            .await;
        if joined.is_none() {
            for abort in aborts {
                abort.abort();
            }
        }
    }
}

/// What a phase's task ended with: a failure to log, or none.
pub(super) trait Outcome {
    fn failure(&self) -> Option<String>;
}

impl Outcome for () {
    fn failure(&self) -> Option<String> {
        None
    }
}

impl<T, E: std::fmt::Display> Outcome for Result<T, E> {
    fn failure(&self) -> Option<String> {
        self.as_ref().err().map(ToString::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_phase_that_never_ends_is_dropped_at_the_deadline() {
        let stopping = Stopping::begin(Duration::from_secs(3));
        let started = Instant::now();
        let never = tokio::spawn(std::future::pending::<()>());
        let abort = never.abort_handle();
        stopping.join(Phase::BackgroundLoops, vec![never]).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        tokio::task::yield_now().await;
        assert!(abort.is_finished(), "the task is aborted");
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_deadline_a_phase_still_gets_its_last_words() {
        let stopping = Stopping::begin(Duration::from_secs(1));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let started = Instant::now();
        let quick = stopping
            .run(Phase::Store, tokio::time::sleep(Duration::from_millis(200)))
            .await;
        assert!(quick.is_some(), "a short goodbye is waited for");
        let slow = stopping
            .run(Phase::Store, tokio::time::sleep(Duration::from_secs(60)))
            .await;
        assert!(slow.is_none());
        assert!(started.elapsed() <= Duration::from_millis(200) + LAST_WORDS);
    }

    #[tokio::test(start_paused = true)]
    async fn phases_that_finish_are_not_waited_for() {
        let stopping = Stopping::begin(Duration::from_secs(30));
        let started = Instant::now();
        let quick = tokio::spawn(async { Ok::<_, String>(()) });
        stopping.join(Phase::EmbeddedWorkers, vec![quick]).await;
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}

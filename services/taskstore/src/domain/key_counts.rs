//! What the dispatch decision knows of each key (tasks running under its
//! concurrency limit, starts within its rate's window, pauses) and the one
//! rule that admits a job under them.

use std::collections::HashMap;

use super::WaitingJob;

/// Per key, as the store counts them: how many tasks run now (published
/// and not yet ended), and how many started within each rate key's
/// window. The decision adds the jobs it sends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyCounts {
    pub running: HashMap<String, u32>,
    pub started: HashMap<String, u32>,
    /// The keys paused now (`domain::pause_key`): their jobs wait.
    pub paused: std::collections::HashSet<String>,
}

impl KeyCounts {
    /// Whether `job` may go now, and if so counts it.
    pub(super) fn admit(&mut self, job: &WaitingJob) -> bool {
        let pause = crate::domain::pause_key(
            job.rate.as_ref().map(|rate| rate.key.as_str()),
            job.limit.as_ref().map(|limit| limit.key.as_str()),
        );
        if self.paused.contains(pause) {
            return false;
        }
        let running = job.limit.as_ref().map(|limit| {
            let n = self.running.get(&limit.key).copied().unwrap_or(0);
            (n < limit.max, &limit.key)
        });
        let started = job.rate.as_ref().map(|rate| {
            let n = self.started.get(&rate.key).copied().unwrap_or(0);
            (n < rate.starts, &rate.key)
        });
        if running.is_some_and(|(room, _)| !room) || started.is_some_and(|(room, _)| !room) {
            return false;
        }
        if let Some((_, key)) = running {
            *self.running.entry(key.clone()).or_default() += 1;
        }
        if let Some((_, key)) = started {
            *self.started.entry(key.clone()).or_default() += 1;
        }
        true
    }
}

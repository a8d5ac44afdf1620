//! Which waiting jobs of a tool go to its workers next, when the tool has
//! room for only some: the dispatch decision every backend calls, so that
//! PostgreSQL and the in-process engine order a backlog the same way.
//!
//! The order: the highest priority first; among equal priorities, the
//! tenant served least recently (round-robin, so one tenant's flood cannot
//! make another's task wait behind it); within a tenant, first in, first out.

use std::collections::HashMap;

/// A task's dispatch priority: 0 (the default) to [`Priority::MAX`]; a
/// higher one is published first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(u8);

/// The `tools/call` `_meta` entry that carries a priority on `/mcp`.
pub const PRIORITY_META_KEY: &str = "mcp-taskstore/priority";

/// Why a priority was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be between 0 and {max}")]
pub struct InvalidPriority {
    /// The highest the caller may ask for.
    pub max: u8,
}

impl Priority {
    /// The highest priority there is.
    pub const MAX: u8 = 9;

    /// `raw` within `0..=cap` (a tenant's cap, at most [`Priority::MAX`]).
    pub fn parse(raw: u32, cap: u8) -> Result<Self, InvalidPriority> {
        let cap = cap.min(Self::MAX);
        u8::try_from(raw)
            .ok()
            .filter(|p| *p <= cap)
            .map(Self)
            .ok_or(InvalidPriority { max: cap })
    }

    /// A stored priority (clamped, so a row of a newer build still sorts).
    pub fn of_stored(stored: i16) -> Self {
        Self(u8::try_from(stored.clamp(0, i16::from(Self::MAX))).unwrap_or(0))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// A priority in a `_meta` object: absent is `None`; a value that is
    /// not a whole number in range is refused.
    pub fn of_meta(
        meta: Option<&serde_json::Map<String, serde_json::Value>>,
        cap: u8,
    ) -> Result<Option<Self>, String> {
        let Some(value) = meta.and_then(|meta| meta.get(PRIORITY_META_KEY)) else {
            return Ok(None);
        };
        let refuse = |why: String| format!("params._meta[\"{PRIORITY_META_KEY}\"] {why}");
        let raw = value
            .as_u64()
            .and_then(|raw| u32::try_from(raw).ok())
            .ok_or_else(|| {
                refuse(
                    InvalidPriority {
                        max: cap.min(Self::MAX),
                    }
                    .to_string(),
                )
            })?;
        Self::parse(raw, cap)
            .map(Some)
            .map_err(|err| refuse(err.to_string()))
    }
}

/// What a tool's queue holds now, as the queue says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    /// Jobs ready in the queue, not yet delivered to any consumer.
    pub ready: u32,
    /// Consumers of the queue (one per worker serving the tool).
    pub consumers: u32,
}

impl QueueDepth {
    /// Whether new jobs may go straight in: nothing waits there, so the
    /// consumers take them at once (each holds up to its prefetch).
    pub fn takes_everything(self) -> bool {
        self.ready == 0
    }

    /// How many jobs of a backlog to add now: one ready per consumer, less
    /// those ready. Each worker already holds what it prefetched, so a job
    /// added now starts about as soon as one added earlier would have; a
    /// queue without consumers has room for one (the broker returns it, or
    /// keeps it for the first worker).
    pub fn room(self) -> u32 {
        self.consumers.max(1).saturating_sub(self.ready)
    }
}

/// A job waiting for room, as the decision sees it. Candidates come in each
/// tenant's own order (priority, highest first, then oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingJob {
    /// The backend's id of the job; lower is older.
    pub id: i64,
    pub tenant: String,
    pub priority: Priority,
}

/// When each tenant of a tool was last served, carried from one decision
/// to the next (per tool; a replica's own memory: replicas that share a
/// tool alternate their decisions under its lock, so each keeps a fair
/// order of its own).
#[derive(Debug, Clone, Default)]
pub struct Turns {
    served: HashMap<String, u64>,
    clock: u64,
}

impl Turns {
    /// Most tenants remembered; past it the oldest memories go (a tenant
    /// forgotten counts as never served, which only moves it forward).
    const MAX_TENANTS: usize = 10_000;

    fn served(&mut self, tenant: &str) {
        self.clock += 1;
        if self.served.len() >= Self::MAX_TENANTS && !self.served.contains_key(tenant) {
            let cutoff = self.clock.saturating_sub(Self::MAX_TENANTS as u64 / 2);
            self.served.retain(|_, at| *at > cutoff);
        }
        self.served.insert(tenant.to_owned(), self.clock);
    }

    fn last_served(&self, tenant: &str) -> u64 {
        self.served.get(tenant).copied().unwrap_or(0)
    }
}

/// Picks up to `room` of `waiting` (indexes into it, in the order they go
/// out), recording whom it served in `turns`.
pub fn next_jobs(waiting: &[WaitingJob], room: usize, turns: &mut Turns) -> Vec<usize> {
    // Each tenant's candidates, in its own order.
    let mut queues: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut of_tenant: HashMap<&str, usize> = HashMap::new();
    for (index, job) in waiting.iter().enumerate() {
        let slot = *of_tenant.entry(job.tenant.as_str()).or_insert_with(|| {
            queues.push((job.tenant.as_str(), Vec::new()));
            queues.len() - 1
        });
        queues[slot].1.push(index);
    }
    for (_, queue) in &mut queues {
        queue.sort_by_key(|&i| (std::cmp::Reverse(waiting[i].priority), waiting[i].id));
        queue.reverse(); // popped from the back
    }
    let mut chosen = Vec::with_capacity(room.min(waiting.len()));
    while chosen.len() < room {
        // The best head: highest priority, then the tenant served least
        // recently, then the oldest job.
        let best = queues
            .iter()
            .enumerate()
            .filter_map(|(q, (tenant, queue))| queue.last().map(|&i| (q, *tenant, i)))
            .min_by_key(|&(_, tenant, i)| {
                (
                    std::cmp::Reverse(waiting[i].priority),
                    turns.last_served(tenant),
                    waiting[i].id,
                )
            });
        let Some((q, tenant, i)) = best else {
            break;
        };
        queues[q].1.pop();
        turns.served(tenant);
        chosen.push(i);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64, tenant: &str, priority: u8) -> WaitingJob {
        WaitingJob {
            id,
            tenant: tenant.into(),
            priority: Priority(priority),
        }
    }

    fn ids(waiting: &[WaitingJob], room: usize, turns: &mut Turns) -> Vec<i64> {
        next_jobs(waiting, room, turns)
            .into_iter()
            .map(|i| waiting[i].id)
            .collect()
    }

    #[test]
    fn tenants_take_turns_whatever_their_backlog() {
        // `noisy` queued 5 before `quiet` queued 1: quiet goes second.
        let waiting = [
            job(1, "noisy", 0),
            job(2, "noisy", 0),
            job(3, "noisy", 0),
            job(4, "noisy", 0),
            job(5, "noisy", 0),
            job(6, "quiet", 0),
            job(7, "third", 0),
        ];
        let mut turns = Turns::default();
        assert_eq!(ids(&waiting, 4, &mut turns), [1, 6, 7, 2]);
        // The turns carry over: next time, the tenants served longest ago
        // come first.
        let later = [job(3, "noisy", 0), job(8, "quiet", 0), job(9, "third", 0)];
        assert_eq!(ids(&later, 2, &mut turns), [8, 9]);
    }

    #[test]
    fn a_higher_priority_goes_first_and_fifo_holds_within_a_tenant() {
        let waiting = [
            job(1, "a", 0),
            job(2, "a", 0),
            job(3, "b", 0),
            job(4, "a", 7),
            job(5, "b", 2),
        ];
        assert_eq!(
            ids(&waiting, 5, &mut Turns::default()),
            [4, 5, 1, 3, 2],
            "7, then 2, then the zeros taking turns, oldest first"
        );
    }

    #[test]
    fn no_room_takes_nothing_and_one_tenant_alone_takes_all_the_room() {
        let waiting = [job(1, "a", 0), job(2, "a", 0), job(3, "a", 0)];
        assert!(next_jobs(&waiting, 0, &mut Turns::default()).is_empty());
        assert_eq!(ids(&waiting, 10, &mut Turns::default()), [1, 2, 3]);
        assert!(next_jobs(&[], 5, &mut Turns::default()).is_empty());
    }

    #[test]
    fn priorities_are_bounded_by_the_tenants_cap() {
        assert_eq!(Priority::parse(0, 9), Ok(Priority(0)));
        assert_eq!(Priority::parse(9, 9), Ok(Priority(9)));
        assert_eq!(Priority::parse(10, 9), Err(InvalidPriority { max: 9 }));
        assert_eq!(Priority::parse(4, 3), Err(InvalidPriority { max: 3 }));
        assert_eq!(
            Priority::parse(u32::MAX, 20),
            Err(InvalidPriority { max: 9 })
        );
        assert_eq!(Priority::of_stored(-3), Priority(0));
        assert_eq!(Priority::of_stored(40), Priority(9));
        let meta = |value: serde_json::Value| {
            let mut meta = serde_json::Map::new();
            meta.insert(PRIORITY_META_KEY.into(), value);
            meta
        };
        assert_eq!(Priority::of_meta(None, 9), Ok(None));
        assert_eq!(
            Priority::of_meta(Some(&meta(serde_json::json!(3))), 9),
            Ok(Some(Priority(3)))
        );
        for bad in [
            serde_json::json!(-1),
            serde_json::json!(2.5),
            serde_json::json!("3"),
            serde_json::json!(10),
        ] {
            assert!(
                Priority::of_meta(Some(&meta(bad.clone())), 9).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_tenant_forgotten_counts_as_never_served() {
        let mut turns = Turns::default();
        for n in 0..(Turns::MAX_TENANTS + 10) {
            turns.served(&format!("t{n}"));
        }
        assert!(turns.served.len() <= Turns::MAX_TENANTS);
        assert_eq!(turns.last_served("t0"), 0);
    }
}

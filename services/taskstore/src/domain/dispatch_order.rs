//! Which waiting jobs of a tool go to its workers next, when the tool has
//! room for only some: the dispatch decision every backend calls, so that
//! PostgreSQL and the in-process engine order a backlog the same way.
//!
//! The order: the highest priority first; among equal priorities, the
//! tenants take turns (round-robin, weighted by each tenant's
//! `dispatch_weight`, so one tenant's flood cannot make another's task
//! wait behind it); within a tenant, first in, first out. A job whose key
//! already runs as many tasks as its tool's concurrency limit allows, or
//! started as many as its rate allows within the window, is passed over
//! (it keeps its place).

use std::collections::HashMap;

use super::KeyCounts;

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
    /// Its key's concurrency limit, if its tool declares one.
    pub limit: Option<crate::domain::KeyLimit>,
    /// Its key's rate of starts, if its tool declares one.
    pub rate: Option<crate::domain::TaskRate>,
}

/// How far each tenant of a tool has been served, carried from one decision
/// to the next (per tool; a replica's own memory: replicas that share a
/// tool alternate their decisions under its lock, so each keeps a fair
/// order of its own). Weighted round-robin by virtual time (stride
/// scheduling): serving a tenant moves it on by [`Turns::STRIDE`] divided
/// by its weight, and the tenant furthest behind goes next; a tenant new to
/// the tool starts where the tool is now, never behind, so a tenant that
/// was idle gets no credit to spend in a burst.
#[derive(Debug, Clone, Default)]
pub struct Turns {
    passes: HashMap<String, u64>,
    /// Where the tool is now: the pass of the tenant served last.
    floor: u64,
}

impl Turns {
    /// Most tenants remembered; past it, the half closest to the floor go
    /// (a tenant forgotten starts at the floor).
    const MAX_TENANTS: usize = 10_000;
    /// One turn of a tenant of weight 1.
    const STRIDE: u64 = 1_000_000;

    fn pass(&self, tenant: &str) -> u64 {
        self.passes
            .get(tenant)
            .copied()
            .unwrap_or(0)
            .max(self.floor)
    }

    fn served(&mut self, tenant: &str, weight: u32) {
        let start = self.pass(tenant);
        self.floor = start;
        self.passes.insert(
            tenant.to_owned(),
            start + Self::STRIDE / u64::from(weight.max(1)),
        );
        if self.passes.len() > Self::MAX_TENANTS {
            // Forget the half closest to the floor: each starts there again,
            // barely ahead of where it was.
            let mut passes: Vec<u64> = self.passes.values().copied().collect();
            passes.sort_unstable();
            let cutoff = passes[passes.len() - Self::MAX_TENANTS / 2 - 1];
            self.passes.retain(|_, pass| *pass > cutoff);
        }
    }
}

/// The weight a tenant has when none is set: one turn per round.
pub const DEFAULT_DISPATCH_WEIGHT: u32 = 1;
/// The largest weight an operator may give a tenant.
pub const MAX_DISPATCH_WEIGHT: u32 = 100;

/// Picks up to `room` of `waiting` (indexes into it, in the order they go
/// out), recording whom it served in `turns`; `weight` gives each tenant's
/// turns per round (1 to [`MAX_DISPATCH_WEIGHT`]). A job whose key is at
/// its limit or rate in `counts` is passed over; `counts` counts the jobs
/// chosen.
pub fn next_jobs(
    waiting: &[WaitingJob],
    room: usize,
    turns: &mut Turns,
    weight: &dyn Fn(&str) -> u32,
    counts: &mut KeyCounts,
) -> Vec<usize> {
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
        // The best head: highest priority, then the tenant furthest behind,
        // then the oldest job.
        let best = queues
            .iter()
            .enumerate()
            .filter_map(|(q, (tenant, queue))| queue.last().map(|&i| (q, *tenant, i)))
            .min_by_key(|&(_, tenant, i)| {
                (
                    std::cmp::Reverse(waiting[i].priority),
                    turns.pass(tenant),
                    waiting[i].id,
                )
            });
        let Some((q, tenant, i)) = best else {
            break;
        };
        queues[q].1.pop();
        if !counts.admit(&waiting[i]) {
            continue; // its key is full: the tenant's next job, if any
        }
        turns.served(tenant, weight(tenant).clamp(1, MAX_DISPATCH_WEIGHT));
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
            limit: None,
            rate: None,
        }
    }

    fn limited(id: i64, tenant: &str, key: &str, max: u32) -> WaitingJob {
        WaitingJob {
            limit: Some(crate::domain::KeyLimit::new(key.into(), max)),
            ..job(id, tenant, 0)
        }
    }

    fn ids(waiting: &[WaitingJob], room: usize, turns: &mut Turns) -> Vec<i64> {
        next_jobs(
            waiting,
            room,
            turns,
            &|_| DEFAULT_DISPATCH_WEIGHT,
            &mut KeyCounts::default(),
        )
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
        let one = &|_: &str| 1;
        assert!(
            next_jobs(
                &waiting,
                0,
                &mut Turns::default(),
                one,
                &mut KeyCounts::default()
            )
            .is_empty()
        );
        assert_eq!(ids(&waiting, 10, &mut Turns::default()), [1, 2, 3]);
        assert!(
            next_jobs(
                &[],
                5,
                &mut Turns::default(),
                one,
                &mut KeyCounts::default()
            )
            .is_empty()
        );
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
    fn a_heavier_tenant_gets_more_turns_and_an_idle_one_no_credit() {
        let mut waiting = Vec::new();
        for n in 0..10 {
            waiting.push(job(n, "big", 0));
            waiting.push(job(100 + n, "small", 0));
        }
        let weight = |tenant: &str| if tenant == "big" { 3 } else { 1 };
        let mut turns = Turns::default();
        let picked = next_jobs(&waiting, 8, &mut turns, &weight, &mut KeyCounts::default());
        let big = picked
            .iter()
            .filter(|&&i| waiting[i].tenant == "big")
            .count();
        assert_eq!((big, picked.len() - big), (6, 2), "three turns to one");
        // A tenant that waited for nothing meanwhile starts where the tool
        // is: one turn now, not a burst of the turns it missed.
        let late = [job(200, "late", 0), job(201, "late", 0), job(10, "big", 0)];
        let next = next_jobs(&late, 2, &mut turns, &weight, &mut KeyCounts::default());
        assert_eq!(
            next.iter().map(|&i| late[i].id).collect::<Vec<_>>(),
            [200, 10]
        );
    }

    #[test]
    fn a_full_key_is_passed_over_and_keeps_its_place() {
        // Key k allows 2 and runs 1 already: one more of it goes; the
        // tenant's unlimited job and the other key's go past the rest.
        let waiting = [
            limited(1, "a", "k", 2),
            limited(2, "a", "k", 2),
            limited(3, "a", "k", 2),
            job(4, "a", 0),
            limited(5, "b", "m", 1),
            limited(6, "b", "m", 1),
        ];
        let mut running = KeyCounts {
            running: HashMap::from([("k".to_owned(), 1)]),
            ..KeyCounts::default()
        };
        let weight = |_: &str| 1;
        let picked = next_jobs(&waiting, 10, &mut Turns::default(), &weight, &mut running);
        let mut picked: Vec<i64> = picked.into_iter().map(|i| waiting[i].id).collect();
        picked.sort_unstable();
        assert_eq!(picked, [1, 4, 5]);
        assert_eq!(running.running["k"], 2);
        assert_eq!(running.running["m"], 1);
        // A priority does not lift a limit, nor does a full key block a
        // lower priority of another.
        let waiting = [
            WaitingJob {
                priority: Priority(9),
                ..limited(7, "a", "k", 2)
            },
            job(8, "a", 0),
        ];
        let picked = next_jobs(&waiting, 10, &mut Turns::default(), &weight, &mut running);
        assert_eq!(picked, [1]);
    }

    #[test]
    fn a_key_that_started_its_rate_waits_for_its_window() {
        let rated = |id: i64, key: &str| WaitingJob {
            rate: Some(crate::domain::TaskRate {
                key: key.into(),
                starts: 3,
                per: std::time::Duration::from_secs(1),
            }),
            ..job(id, "a", 0)
        };
        let waiting = [rated(1, "r"), rated(2, "r"), rated(3, "r"), rated(4, "s")];
        // Two of r's started within the window already: one more may.
        let mut counts = KeyCounts {
            started: HashMap::from([("r".to_owned(), 2)]),
            ..KeyCounts::default()
        };
        let picked = next_jobs(&waiting, 10, &mut Turns::default(), &|_| 1, &mut counts);
        assert_eq!(picked, [0, 3]);
        assert_eq!(counts.started["r"], 3);
        // A job limited both ways goes only when both allow it.
        let both = WaitingJob {
            limit: Some(crate::domain::KeyLimit::new("k".into(), 5)),
            ..rated(5, "r")
        };
        let picked = next_jobs(&[both], 10, &mut Turns::default(), &|_| 1, &mut counts);
        assert!(picked.is_empty());
        assert!(!counts.running.contains_key("k"), "nothing counted");
    }

    #[test]
    fn a_paused_key_waits_and_the_others_go() {
        let waiting = [
            limited(1, "a", "k", 5),
            limited(2, "a", "m", 5),
            job(3, "b", 0),
        ];
        let mut counts = KeyCounts {
            paused: ["k".to_owned(), String::new()].into(),
            ..KeyCounts::default()
        };
        // k is paused, and so is every job of no key ("" pauses the tool).
        let picked = next_jobs(&waiting, 10, &mut Turns::default(), &|_| 1, &mut counts);
        assert_eq!(picked, [1]);
    }

    #[test]
    fn the_turns_remember_a_bounded_number_of_tenants() {
        let mut turns = Turns::default();
        for n in 0..(Turns::MAX_TENANTS + 10) {
            turns.served(&format!("t{n}"), 1);
        }
        assert!(turns.passes.len() <= Turns::MAX_TENANTS);
        assert_eq!(turns.pass("t0"), turns.floor, "forgotten: at the floor");
    }
}

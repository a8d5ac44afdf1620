//! Which waiting jobs of a tool go to its workers next, when the tool has
//! room for only some: the dispatch decision every backend calls, so that
//! PostgreSQL and the in-process engine order a backlog the same way.
//!
//! The order: the highest priority first; among equal priorities, the
//! tenants take turns (round-robin, weighted by each tenant's
//! `dispatch_weight`, so one tenant's flood cannot make another's task
//! wait behind it); within a tenant, its fairness keys take turns (the
//! same way, each of weight 1: one customer's flood cannot make another
//! customer of the tenant wait behind it); within a key, first in, first
//! out. A job whose limit key
//! already runs as many tasks as its tool's concurrency limit allows, or
//! started as many as its rate allows within the window, is passed over
//! (it keeps its place).

use std::collections::HashMap;

use super::{KeyCounts, Priority, Turns};

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
/// tenant's own order (its keys as the store read them, from
/// `Turns::resume_at`; within a key, priority, highest first, then oldest
/// first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingJob {
    /// The backend's id of the job; lower is older.
    pub id: i64,
    pub tenant: String,
    pub priority: Priority,
    /// Its fairness key's value within its tenant ("" when its tool
    /// declares none).
    pub fairness: String,
    /// Its key's concurrency limit, if its tool declares one.
    pub limit: Option<crate::domain::KeyLimit>,
    /// Its key's rate of starts, if its tool declares one.
    pub rate: Option<crate::domain::TaskRate>,
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
    // Each (tenant, fairness key)'s candidates, in the order read.
    let mut queues: Vec<(&str, &str, Vec<usize>)> = Vec::new();
    let mut of_key: HashMap<(&str, &str), usize> = HashMap::new();
    for (index, job) in waiting.iter().enumerate() {
        let key = (job.tenant.as_str(), job.fairness.as_str());
        let slot = *of_key.entry(key).or_insert_with(|| {
            queues.push((key.0, key.1, Vec::new()));
            queues.len() - 1
        });
        queues[slot].2.push(index);
    }
    for (_, _, queue) in &mut queues {
        queue.sort_by_key(|&i| (std::cmp::Reverse(waiting[i].priority), waiting[i].id));
        queue.reverse(); // popped from the back
    }
    let mut chosen = Vec::with_capacity(room.min(waiting.len()));
    while chosen.len() < room {
        // The best head: highest priority, then the tenant furthest behind,
        // then its key furthest behind, then the oldest job.
        let best = queues
            .iter()
            .enumerate()
            .filter_map(|(q, (tenant, key, queue))| queue.last().map(|&i| (q, *tenant, *key, i)))
            .min_by_key(|&(_, tenant, key, i)| {
                (
                    std::cmp::Reverse(waiting[i].priority),
                    turns.tenant_pass(tenant),
                    turns.key_pass(tenant, key),
                    waiting[i].id,
                )
            });
        let Some((q, tenant, key, i)) = best else {
            break;
        };
        queues[q].2.pop();
        if !counts.admit(&waiting[i]) {
            continue; // its limit key is full: the key's next job, if any
        }
        turns.served(tenant, key, weight(tenant).clamp(1, MAX_DISPATCH_WEIGHT));
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
            priority: Priority::of_stored(i16::from(priority)),
            fairness: String::new(),
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

    fn keyed(id: i64, tenant: &str, key: &str) -> WaitingJob {
        WaitingJob {
            fairness: key.into(),
            ..job(id, tenant, 0)
        }
    }

    #[test]
    fn a_tenants_fairness_keys_take_turns_and_fifo_holds_within_a_key() {
        // Customer c1 of tenant a flooded before c2 came; tenant b has one
        // job: the tenants take turns, and within a, the customers.
        let waiting = [
            keyed(1, "a", "c1"),
            keyed(2, "a", "c1"),
            keyed(3, "a", "c1"),
            keyed(4, "a", "c2"),
            keyed(5, "a", "c2"),
            keyed(6, "b", ""),
        ];
        assert_eq!(ids(&waiting, 6, &mut Turns::default()), [1, 6, 4, 2, 5, 3]);
        // A priority still goes first, whatever its key's turn.
        let urgent = [
            keyed(1, "a", "c1"),
            keyed(2, "a", "c2"),
            WaitingJob {
                priority: Priority::of_stored(5),
                ..keyed(3, "a", "c1")
            },
        ];
        assert_eq!(ids(&urgent, 3, &mut Turns::default()), [3, 2, 1]);
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
                priority: Priority::of_stored(9),
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
}
